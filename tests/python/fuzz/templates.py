"""Kernel templates of the differential fuzzer. Each template draws its parameters (tile
sizes, stages, threads, shapes with tails, dtypes, options) from a numpy generator, builds
the kernel, the call's arguments and numpy's answer for every output.

A template is a class with:
  draw(rng, target)     -> dict of parameters (Python values only, printable); target is the
                           back end's name, so that a draw avoids what it refuses by design
                           (int8 and bfloat16 tensors on webgpu, reductions of shared tiles on
                           GPU targets), which would only test the refusal
  kernel(p)             -> the T.prim_func
  arguments(p, rng)     -> every argument in order; outputs prefilled (NaN where the kernel
                           must write, the initial value where it accumulates)
  expected(p, args)     -> {argument index: the array numpy computes for it}
  tolerance(p)          -> (rtol, atol) of the comparison
Reads past a tensor's end yield 0 and writes past it are skipped (docs/tile_ops.md): the
references pad with zeros where a tile runs past the end.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

import tilelang.language as T

NP = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "int32": np.int32,
      "int8": np.int8}
# Relative size of one rounding of each dtype.
EPS = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


def pick(rng, options):
    """One of options (a list of Python values), as a Python value."""
    return options[int(rng.integers(0, len(options)))]


# What a back end refuses by design (a typed "not supported" error): draws avoid it.
REFUSED_DTYPES = {"webgpu": {"int8", "bfloat16"}}


def _refused(target):
    refused = set(REFUSED_DTYPES.get(target, set()))
    if target == "webgpu":
        from tilelang.jit import webgpu
        if not webgpu._device().has_f16:  # float16 needs the adapter's shader-f16
            refused.add("float16")
    return refused


def dtype_for(rng, target, options):
    """One of options that target takes."""
    refused = _refused(target.split()[0])
    return pick(rng, [d for d in options if d not in refused] or ["float32"])


def extent_with_tail(rng, tile, max_tiles=3):
    """A problem extent: whole tiles, a partial last tile, or less than one tile."""
    kind = pick(rng, ["exact", "tail", "tail", "small"]) if tile > 1 else "exact"
    if kind == "small":
        return int(rng.integers(1, tile + 1))
    tiles = int(rng.integers(1, max_tiles + 1))
    return tiles * tile if kind == "exact" else max(1, tiles * tile - int(rng.integers(1, tile)))


def uniform(rng, shape, dtype, lo=-1.0, hi=1.0):
    if dtype.startswith("int"):
        return rng.integers(int(lo), int(hi) + 1, shape).astype(NP[dtype])
    return rng.uniform(lo, hi, shape).astype(NP[dtype])


def padded(a, shape):
    """a enlarged to shape with zeros (what tiles read past the end)."""
    out = np.zeros(shape, np.float64)
    out[tuple(slice(0, n) for n in a.shape)] = a
    return out


def ceil(a, b):
    return (a + b - 1) // b


def float_tolerance(dtype, terms=1):
    eps = EPS[dtype]
    return 4 * eps * terms, 4 * eps * terms


# ---------------------------------------------------------------------------- GEMM

class Gemm:
    name = "gemm"

    def draw(self, rng, target):
        dtype = dtype_for(rng, target, ["float32", "float16", "bfloat16", "float16", "int8"])
        bm, bn, bk = pick(rng, [16, 32, 64]), pick(rng, [16, 32, 64]), pick(rng, [16, 32])
        k_tiles = pick(rng, [1, 2, 3, 5])
        return dict(M=extent_with_tail(rng, bm), N=extent_with_tail(rng, bn),
                    K=max(1, k_tiles * bk - pick(rng, [0, 0, int(rng.integers(1, bk))])),
                    block_M=bm, block_N=bn, block_K=bk, dtype=dtype, threads=pick(rng, [32, 64, 128, 256]),
                    num_stages=pick(rng, [0, 1, 2, 3]), transpose_A=bool(rng.integers(0, 2)),
                    transpose_B=bool(rng.integers(0, 2)))

    def kernel(self, p):
        M, N, K = p["M"], p["N"], p["K"]
        bm, bn, bk = p["block_M"], p["block_N"], p["block_K"]
        dtype, ta, tb = p["dtype"], p["transpose_A"], p["transpose_B"]
        acc_t = "int32" if dtype == "int8" else "float32"
        a_shape, b_shape = ((K, M) if ta else (M, K)), ((N, K) if tb else (K, N))
        a_tile, b_tile = ((bk, bm) if ta else (bm, bk)), ((bn, bk) if tb else (bk, bn))

        @T.prim_func
        def gemm(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), acc_t)):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=p["threads"]) as (bx, by):
                As = T.alloc_shared(a_tile, dtype)
                Bs = T.alloc_shared(b_tile, dtype)
                Cf = T.alloc_fragment((bm, bn), acc_t)
                T.clear(Cf)
                for k in T.Pipelined(T.ceildiv(K, bk), num_stages=p["num_stages"]):
                    if ta:
                        T.copy(A[k * bk, by * bm], As)
                    else:
                        T.copy(A[by * bm, k * bk], As)
                    if tb:
                        T.copy(B[bx * bn, k * bk], Bs)
                    else:
                        T.copy(B[k * bk, bx * bn], Bs)
                    T.gemm(As, Bs, Cf, transpose_A=ta, transpose_B=tb)
                T.copy(Cf, C[by * bm, bx * bn])

        return gemm

    def arguments(self, p, rng):
        M, N, K, dtype = p["M"], p["N"], p["K"], p["dtype"]
        lo, hi = (-8, 8) if dtype == "int8" else (-1, 1)
        a = uniform(rng, (K, M) if p["transpose_A"] else (M, K), dtype, lo, hi)
        b = uniform(rng, (N, K) if p["transpose_B"] else (K, N), dtype, lo, hi)
        c = np.zeros((M, N), np.int32) if dtype == "int8" else np.full((M, N), np.nan, np.float32)
        if dtype == "int8":
            c[...] = -12345  # every element is written
        return [a, b, c]

    def expected(self, p, args):
        a, b = (x.astype(np.float64) for x in args[:2])
        a = a.T if p["transpose_A"] else a
        b = b.T if p["transpose_B"] else b
        return {2: a @ b}

    def tolerance(self, p):
        if p["dtype"] == "int8":
            return 0.0, 0.0
        # Products of the inputs are exact in float32; the sums are rounded.
        return 1e-5, 4e-6 * p["K"]


# ---------------------------------------------------------------------------- reductions

REDUCE_OPS = {"sum": np.sum, "max": np.max, "min": np.min, "abssum": lambda x, axis: np.sum(np.abs(x), axis=axis),
              "absmax": lambda x, axis: np.max(np.abs(x), axis=axis)}


class Reduce:
    name = "reduce"

    def draw(self, rng, target):
        op = pick(rng, list(REDUCE_OPS))
        bm, bn = pick(rng, [1, 4, 8, 16, 32]), pick(rng, [1, 8, 16, 32, 64])
        return dict(op=op, dim=pick(rng, [0, 1, -1]), block_M=bm, block_N=bn, M=extent_with_tail(rng, bm),
                    N=extent_with_tail(rng, bn), threads=pick(rng, [32, 64, 128, 256]),
                    clear=op == "abssum" or bool(rng.integers(0, 2)),
                    scope=pick(rng, ["fragment", "shared"] if target == "cpu" else ["fragment"]),
                    dtype=dtype_for(rng, target, ["float32", "float32", "float16", "int32"]))

    @staticmethod
    def _axis(p):
        """The axis of the tile that is reduced (1: along rows, one result per row)."""
        return 1 if p["dim"] in (1, -1) else 0

    def _shape(self, p):
        gm, gn = ceil(p["M"], p["block_M"]), ceil(p["N"], p["block_N"])
        return (gm * p["block_M"], gn) if self._axis(p) == 1 else (gm, gn * p["block_N"])

    def kernel(self, p):
        M, N, bm, bn, dtype, dim = p["M"], p["N"], p["block_M"], p["block_N"], p["dtype"], p["dim"]
        gm, gn = ceil(M, bm), ceil(N, bn)
        axis = self._axis(p)
        out_shape = self._shape(p)
        r_len = bm if axis == 1 else bn
        op, clear, scope = p["op"], p["clear"], p["scope"]
        alloc = T.alloc_fragment if scope == "fragment" else T.alloc_shared

        @T.prim_func
        def reduce(X: T.Tensor((M, N), dtype), Init: T.Tensor(out_shape, dtype), Out: T.Tensor(out_shape, dtype)):
            with T.Kernel(gn, gm, threads=p["threads"]) as (bx, by):
                x = alloc((bm, bn), dtype)
                r = T.alloc_fragment((r_len,), dtype)
                T.copy(X[by * bm, bx * bn], x)
                if axis == 1:
                    T.copy(Init[by * bm:(by + 1) * bm, bx], r)
                else:
                    T.copy(Init[by, bx * bn:(bx + 1) * bn], r)
                if op == "sum":
                    T.reduce_sum(x, r, dim=dim, clear=clear)
                elif op == "max":
                    T.reduce_max(x, r, dim=dim, clear=clear)
                elif op == "min":
                    T.reduce_min(x, r, dim=dim, clear=clear)
                elif op == "abssum":
                    T.reduce_abssum(x, r, dim=dim)
                else:
                    T.reduce_absmax(x, r, dim=dim, clear=clear)
                if axis == 1:
                    T.copy(r, Out[by * bm:(by + 1) * bm, bx])
                else:
                    T.copy(r, Out[by, bx * bn:(bx + 1) * bn])

        return reduce

    def arguments(self, p, rng):
        dtype = p["dtype"]
        lo, hi = (-50, 50) if dtype == "int32" else (-1, 1)
        x = uniform(rng, (p["M"], p["N"]), dtype, lo, hi)
        init = uniform(rng, self._shape(p), dtype, lo, hi)
        out = np.full(self._shape(p), -7 if dtype == "int32" else np.nan, NP[dtype])
        return [x, init, out]

    def expected(self, p, args):
        x, init = args[0].astype(np.float64), args[1].astype(np.float64)
        bm, bn = p["block_M"], p["block_N"]
        gm, gn = ceil(p["M"], bm), ceil(p["N"], bn)
        tiles = padded(x, (gm * bm, gn * bn)).reshape(gm, bm, gn, bn)
        if self._axis(p) == 1:  # along the rows of each tile: (gm, bm, gn)
            red = REDUCE_OPS[p["op"]](tiles, axis=3).reshape(gm * bm, gn)
        else:  # along the columns of each tile: (gm, gn, bn)
            red = REDUCE_OPS[p["op"]](tiles, axis=1).reshape(gm, gn * bn)
        if not p["clear"] and p["op"] != "abssum":
            combine = {"sum": np.add, "max": np.maximum, "min": np.minimum, "absmax": np.maximum}[p["op"]]
            red = combine(init, red)
        return {2: red}

    def tolerance(self, p):
        if p["dtype"] == "int32":
            return 0.0, 0.0
        n = p["block_N"] if self._axis(p) == 1 else p["block_M"]
        rt, at = float_tolerance(p["dtype"], 2 + (n if "sum" in p["op"] else 0))
        return rt, at


# ---------------------------------------------------------------------------- element-wise with broadcast

def random_expression(rng, depth):
    """A small expression tree over the leaves 'a' (the element), 'b' (the broadcast
    operand) and constants."""
    if depth == 0 or rng.random() < 0.25:
        leaf = pick(rng, ["a", "b", "a", "b", "const"])
        return ("const", float(pick(rng, [0.5, -1.5, 2.0, 3.0]))) if leaf == "const" else (leaf,)
    op = pick(rng, ["add", "sub", "mul", "max", "min", "abs", "select", "exp", "add", "mul"])
    if op == "abs":
        return ("abs", random_expression(rng, depth - 1))
    if op == "exp":
        return ("exp", pick(rng, [("a",), ("b",)]))  # bounded arguments only
    return (op, random_expression(rng, depth - 1), random_expression(rng, depth - 1))


def evaluate(tree, a, b, ops):
    kind = tree[0]
    if kind == "a":
        return a
    if kind == "b":
        return b
    if kind == "const":
        return ops["const"](tree[1])
    args = [evaluate(t, a, b, ops) for t in tree[1:]]
    return ops[kind](*args)


def evaluate_with_ties(tree, a, b, tie):
    """(numpy's value of the tree, where it is unsure: a select's two sides differed by
    less than `tie` relative to their size, or the value depends on such a select)."""
    kind = tree[0]
    if kind in ("a", "b"):
        v = a if kind == "a" else b
        return v, np.zeros(np.shape(v), bool)
    if kind == "const":
        return tree[1], np.zeros((), bool)
    parts = [evaluate_with_ties(t, a, b, tie) for t in tree[1:]]
    value = NP_OPS[kind](*(v for v, _ in parts))
    unsure = np.zeros((), bool)
    for _, u in parts:
        unsure = unsure | u
    if kind == "select":
        # Sides equal in float64 are equal in the kernel too (max(a, b) against a, say); sides
        # apart by less than a rounding may compare either way there.
        x, y = parts[0][0], parts[1][0]
        unsure = unsure | ((x != y) & (np.abs(x - y) <= tie * (1 + np.abs(x) + np.abs(y))))
    return value, unsure


T_OPS = {"const": lambda v: v, "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
         "max": lambda x, y: T.max(x, y), "min": lambda x, y: T.min(x, y), "abs": lambda x: T.abs(x),
         "exp": lambda x: T.exp(x), "select": lambda x, y: T.if_then_else(x > y, x, y * 0.5)}
NP_OPS = {"const": lambda v: v, "add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum,
          "min": np.minimum, "abs": np.abs, "exp": np.exp, "select": lambda x, y: np.where(x > y, x, y * 0.5)}


def expression_text(tree):
    if tree[0] in ("a", "b"):
        return tree[0]
    if tree[0] == "const":
        return repr(tree[1])
    return f"{tree[0]}({', '.join(expression_text(t) for t in tree[1:])})"


class Elementwise:
    name = "elementwise"

    def draw(self, rng, target):
        bm, bn = pick(rng, [1, 2, 8, 16, 32]), pick(rng, [1, 4, 16, 32, 64])
        p = dict(M=extent_with_tail(rng, bm), N=extent_with_tail(rng, bn), block_M=bm, block_N=bn,
                    broadcast=pick(rng, ["row", "col", "full", "scalar"]),
                    via=pick(rng, ["global", "fragment", "shared"]), dtype=dtype_for(rng, target, ["float32", "float16",
                                                                                      "bfloat16", "float32"]),
                    threads=pick(rng, [32, 64, 128, 256]), seed=int(rng.integers(0, 2 ** 31)))
        p["expr"] = expression_text(self._tree(p))  # for the reproduction line
        return p

    @staticmethod
    def _tree(p):
        return random_expression(np.random.default_rng(p["seed"]), 3)

    def _b_shape(self, p):
        return {"row": (p["N"],), "col": (p["M"],), "full": (p["M"], p["N"]), "scalar": None}[p["broadcast"]]

    def kernel(self, p):
        M, N, bm, bn, dtype, via, bc = p["M"], p["N"], p["block_M"], p["block_N"], p["dtype"], p["via"], p["broadcast"]
        tree = self._tree(p)
        b_shape = self._b_shape(p) or (1,)

        def f(a, b):
            return evaluate(tree, a, b, T_OPS)

        @T.prim_func
        def elementwise(A: T.Tensor((M, N), dtype), B: T.Tensor(b_shape, dtype), s: T.float32,
                        C: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=p["threads"]) as (bx, by):
                if via == "global":
                    for i, j in T.Parallel(bm, bn):
                        r, c = by * bm + i, bx * bn + j
                        if bc == "row":
                            C[r, c] = f(A[r, c], B[c])
                        elif bc == "col":
                            C[r, c] = f(A[r, c], B[r])
                        elif bc == "full":
                            C[r, c] = f(A[r, c], B[r, c])
                        else:
                            C[r, c] = f(A[r, c], T.cast(s, dtype))
                else:
                    t = T.alloc_fragment((bm, bn), dtype) if via == "fragment" else T.alloc_shared((bm, bn), dtype)
                    o = T.alloc_fragment((bm, bn), dtype)
                    T.copy(A[by * bm, bx * bn], t)
                    for i, j in T.Parallel(bm, bn):
                        r, c = by * bm + i, bx * bn + j
                        if bc == "row":
                            o[i, j] = f(t[i, j], B[c])
                        elif bc == "col":
                            o[i, j] = f(t[i, j], B[r])
                        elif bc == "full":
                            o[i, j] = f(t[i, j], B[r, c])
                        else:
                            o[i, j] = f(t[i, j], T.cast(s, dtype))
                    T.copy(o, C[by * bm, bx * bn])

        return elementwise

    def arguments(self, p, rng):
        dtype = p["dtype"]
        a = uniform(rng, (p["M"], p["N"]), dtype)
        b = uniform(rng, self._b_shape(p) or (1,), dtype)
        s = float(np.float32(rng.uniform(-1, 1)).astype(NP[dtype]))
        return [a, b, s, np.full((p["M"], p["N"]), np.nan, NP[dtype])]

    def expected(self, p, args):
        a, b, s = args[0].astype(np.float64), args[1].astype(np.float64), args[2]
        bc = p["broadcast"]
        bb = {"row": b[None, :], "col": b[:, None] if b.ndim == 1 else b, "full": b, "scalar": s}[bc]
        out, unsure = evaluate_with_ties(self._tree(p), a, np.broadcast_to(bb, a.shape), 4 * EPS[p["dtype"]])
        out = np.broadcast_to(out, a.shape).astype(NP[p["dtype"]]).astype(np.float64)
        # Where a select compared two values equal to within rounding, the kernel may take
        # either branch (it rounds its intermediates, numpy's float64 does not).
        return {3: np.ma.masked_array(out, mask=np.broadcast_to(unsure, a.shape))}

    def tolerance(self, p):
        # Intermediate values stay below ~10 (exp of [-1, 1], three levels); a few roundings.
        eps = EPS[p["dtype"]]
        return 8 * eps, 80 * eps


# ---------------------------------------------------------------------------- copies with offsets, unit extents

class Copy:
    name = "copy"

    def draw(self, rng, target):
        rank = pick(rng, [2, 2, 3])
        tile = [pick(rng, [1, 1, 2, 4, 8, 16]) for _ in range(rank)]
        shape = [extent_with_tail(rng, t) for t in tile]
        offset = [pick(rng, [0, 0, 1, 3]) for _ in range(rank)]
        # Lower-rank tiles drop unit extents: a (1, 8) tile of a 3-D tensor may be written (8,).
        drop = rank == 3 and tile[0] == 1 and bool(rng.integers(0, 2))
        return dict(shape=shape, tile=tile, offset=offset, drop_leading=drop,
                    path=pick(rng, ["shared", "fragment", "shared-fragment", "fragment-shared"]),
                    form=pick(rng, ["point", "slice"]), dtype=dtype_for(rng, target, ["float32", "float16", "int32"]),
                    threads=pick(rng, [32, 64, 128]))

    def kernel(self, p):
        shape, tile, off, dtype = tuple(p["shape"]), tuple(p["tile"]), p["offset"], p["dtype"]
        rank = len(shape)
        grid = [ceil(shape[d], tile[d]) for d in range(rank)]
        buf_tile = tile[1:] if p["drop_leading"] else tile
        path, form = p["path"].split("-"), p["form"]

        def alloc(kind):
            return T.alloc_shared(buf_tile, dtype) if kind == "shared" else T.alloc_fragment(buf_tile, dtype)

        def region(G, base):
            if form == "point":
                return G[tuple(base)]
            return G[tuple(slice(b, b + t) for b, t in zip(base, tile))]

        def corner(ids, shift):
            """The tile's first element: block indices (bx first) times the tile, plus shift."""
            idx = list(reversed(ids))
            return [idx[d] * tile[d] + shift[d] for d in range(rank)]

        @T.prim_func
        def copy(A: T.Tensor(shape, dtype), Out: T.Tensor(shape, dtype)):
            with T.Kernel(*reversed(grid), threads=p["threads"]) as ids:
                start = corner(ids, [0] * rank)
                src = corner(ids, off)
                first = alloc(path[0])
                T.copy(region(A, src), first)
                last = first
                if len(path) > 1:
                    last = alloc(path[1])
                    T.copy(first, last)
                T.copy(last, region(Out, start))

        return copy

    def arguments(self, p, rng):
        shape = tuple(p["shape"])
        return [uniform(rng, shape, p["dtype"], -100, 100), np.full(shape, -9 if p["dtype"] == "int32" else np.nan,
                                                                    NP[p["dtype"]])]

    def expected(self, p, args):
        a = args[0].astype(np.float64)
        shape, off = p["shape"], p["offset"]
        big = padded(a, tuple(s + o for s, o in zip(shape, off)))
        return {1: big[tuple(slice(o, o + s) for s, o in zip(shape, off))]}

    def tolerance(self, p):
        return 0.0, 0.0


# ---------------------------------------------------------------------------- cumsum

class Cumsum:
    name = "cumsum"

    def draw(self, rng, target):
        dim = pick(rng, [0, 1])
        block = pick(rng, [1, 4, 8, 16, 32])
        length = pick(rng, [1, 3, 16, 32, 64, 100])  # the scanned extent, one tile
        other = extent_with_tail(rng, block)
        M, N = (length, other) if dim == 0 else (other, length)
        return dict(M=M, N=N, dim=dim, block=block, reverse=bool(rng.integers(0, 2)),
                    scope=pick(rng, ["fragment", "shared"]), threads=pick(rng, [32, 64, 128]),
                    dtype=dtype_for(rng, target, ["float32", "float32", "int32"]))

    def kernel(self, p):
        M, N, dim, block, dtype, scope = p["M"], p["N"], p["dim"], p["block"], p["dtype"], p["scope"]
        tile = (block, N) if dim == 1 else (M, block)
        blocks = ceil(M, block) if dim == 1 else ceil(N, block)

        @T.prim_func
        def cumsum(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
            with T.Kernel(blocks, threads=p["threads"]) as bx:
                r0 = bx * block if dim == 1 else 0
                c0 = 0 if dim == 1 else bx * block
                if scope == "shared":
                    s = T.alloc_shared(tile, dtype)
                    T.copy(X[r0, c0], s)
                    T.cumsum(s, dim=dim, reverse=p["reverse"])
                    T.copy(s, Y[r0, c0])
                else:
                    x = T.alloc_fragment(tile, dtype)
                    y = T.alloc_fragment(tile, dtype)
                    T.copy(X[r0, c0], x)
                    T.cumsum(x, y, dim=dim, reverse=p["reverse"])
                    T.copy(y, Y[r0, c0])

        return cumsum

    def arguments(self, p, rng):
        dt = p["dtype"]
        return [uniform(rng, (p["M"], p["N"]), dt, -20, 20) if dt == "int32" else uniform(rng, (p["M"], p["N"]), dt),
                np.full((p["M"], p["N"]), -3 if dt == "int32" else np.nan, NP[dt])]

    def expected(self, p, args):
        x = args[0].astype(np.float64)
        if p["reverse"]:
            y = np.flip(np.cumsum(np.flip(x, p["dim"]), axis=p["dim"]), p["dim"])
        else:
            y = np.cumsum(x, axis=p["dim"])
        return {1: y}

    def tolerance(self, p):
        return (0.0, 0.0) if p["dtype"] == "int32" else (1e-5, 1e-5 * max(p["M"], p["N"]))


# ---------------------------------------------------------------------------- softmax

class Softmax:
    name = "softmax"

    def draw(self, rng, target):
        bm = pick(rng, [1, 2, 4, 8, 16])
        return dict(M=extent_with_tail(rng, bm), N=pick(rng, [1, 8, 16, 30, 64, 128]), block_M=bm,
                    exp2=bool(rng.integers(0, 2)), scale=pick(rng, [1.0, 4.0]), threads=pick(rng, [32, 64, 128]),
                    dtype=dtype_for(rng, target, ["float32", "float16"]))

    def kernel(self, p):
        M, N, bm, dtype, scale = p["M"], p["N"], p["block_M"], p["dtype"], p["scale"]
        log2e = 1.4426950408889634

        @T.prim_func
        def softmax(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(M, bm), threads=p["threads"]) as bx:
                x = T.alloc_fragment((bm, N), "float32")
                mx = T.alloc_fragment((bm,), "float32")
                sm = T.alloc_fragment((bm,), "float32")
                T.copy(X[bx * bm, 0], x)
                T.reduce_max(x, mx, dim=1)
                for i, j in T.Parallel(bm, N):
                    if p["exp2"]:
                        x[i, j] = T.exp2((x[i, j] - mx[i]) * (scale * log2e))
                    else:
                        x[i, j] = T.exp((x[i, j] - mx[i]) * scale)
                T.reduce_sum(x, sm, dim=1)
                for i, j in T.Parallel(bm, N):
                    x[i, j] = x[i, j] / sm[i]
                T.copy(x, Y[bx * bm, 0])

        return softmax

    def arguments(self, p, rng):
        return [uniform(rng, (p["M"], p["N"]), p["dtype"], -3, 3), np.full((p["M"], p["N"]), np.nan, NP[p["dtype"]])]

    def expected(self, p, args):
        x = args[0].astype(np.float64) * p["scale"]
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return {1: e / e.sum(axis=1, keepdims=True)}

    def tolerance(self, p):
        return (1e-5, 1e-6) if p["dtype"] == "float32" else (4e-3, 1e-3)


# ---------------------------------------------------------------------------- pipelines with trip counts

class Pipeline:
    name = "pipeline"

    def draw(self, rng, target):
        bm, bn = pick(rng, [8, 16, 32]), pick(rng, [8, 16, 32, 64])
        # dynamic: the trip count is T.ceildiv of a dynamic dimension, known when the kernel
        # runs (0 for an empty input).
        return dict(trips=pick(rng, [0, 1, 2, 3, 7]), block_M=bm, block_N=bn, N=extent_with_tail(rng, bn),
                    dynamic=bool(rng.integers(0, 2)),
                    num_stages=pick(rng, [0, 1, 2, 3, 4]), threads=pick(rng, [32, 64, 128, 256]),
                    body=pick(rng, ["parallel", "gemm", "two-copies"]),
                    dtype=dtype_for(rng, target, ["float32", "float16"]))

    def kernel(self, p):
        trips, bm, bn, N, dtype, body = p["trips"], p["block_M"], p["block_N"], p["N"], p["dtype"], p["body"]
        rows = max(trips, 1) * bm
        if p["dynamic"]:
            rows = T.dynamic("rows")
            trips = T.ceildiv(rows, bm)

        @T.prim_func
        def pipeline(A: T.Tensor((rows, N), dtype), W: T.Tensor((rows, bm), dtype), Out: T.Tensor((bm, N), "float32")):
            with T.Kernel(T.ceildiv(N, bn), threads=p["threads"]) as bx:
                s = T.alloc_shared((bm, bn), dtype)
                w = T.alloc_shared((bm, bm), dtype)
                acc = T.alloc_fragment((bm, bn), "float32")
                T.clear(acc)
                for k in T.Pipelined(trips, num_stages=p["num_stages"]):
                    T.copy(A[k * bm, bx * bn], s)
                    if body == "parallel":
                        for i, j in T.Parallel(bm, bn):
                            acc[i, j] += s[i, j] * 2.0
                    elif body == "gemm":
                        T.copy(W[k * bm, 0], w)
                        T.gemm(w, s, acc)
                    else:
                        T.copy(W[k * bm, 0], w)
                        for i, j in T.Parallel(bm, bn):
                            acc[i, j] += s[i, j] * w[i, i]
                T.copy(acc, Out[0, bx * bn])

        return pipeline

    def arguments(self, p, rng):
        rows = (p["trips"] if p["dynamic"] else max(p["trips"], 1)) * p["block_M"]
        return [uniform(rng, (rows, p["N"]), p["dtype"]), uniform(rng, (rows, p["block_M"]), p["dtype"]),
                np.full((p["block_M"], p["N"]), np.nan, np.float32)]

    def expected(self, p, args):
        a, w = args[0].astype(np.float64), args[1].astype(np.float64)
        bm, trips = p["block_M"], p["trips"]
        out = np.zeros((bm, p["N"]))
        for k in range(trips):
            s, wk = a[k * bm:(k + 1) * bm], w[k * bm:(k + 1) * bm]
            if p["body"] == "parallel":
                out += 2 * s
            elif p["body"] == "gemm":
                out += wk @ s
            else:  # the product of two elements is of their dtype (rounded), then accumulated
                out += (s * np.diag(wk)[:, None]).astype(NP[p["dtype"]]).astype(np.float64)
        return {2: out}

    def tolerance(self, p):
        return 1e-5, 1e-5 * max(1, p["trips"]) * p["block_M"]


# ---------------------------------------------------------------------------- atomics

class Atomic:
    name = "atomic"

    def draw(self, rng, target):
        bm, bn = pick(rng, [1, 4, 8, 16]), pick(rng, [1, 8, 16, 32])
        return dict(M=extent_with_tail(rng, bm, 4), N=extent_with_tail(rng, bn, 4), block_M=bm, block_N=bn,
                    rows=pick(rng, [1, 3, 7]), op=pick(rng, ["add", "add", "max", "min"]),
                    form=pick(rng, ["element", "tile"]), dtype=dtype_for(rng, target, ["int32", "int32", "float32"]),
                    threads=pick(rng, [32, 64, 128]))

    def kernel(self, p):
        M, N, bm, bn, rows, op, dtype = p["M"], p["N"], p["block_M"], p["block_N"], p["rows"], p["op"], p["dtype"]
        form = p["form"] if p["op"] == "add" else "element"
        out_rows = rows * bm

        @T.prim_func
        def atomic(X: T.Tensor((M, N), dtype), Out: T.Tensor((out_rows, N), dtype)):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=p["threads"]) as (bx, by):
                x = T.alloc_fragment((bm, bn), dtype)
                T.copy(X[by * bm, bx * bn], x)
                # Block rows by and by + rows collide on the same output rows.
                base = (by % rows) * bm
                if form == "tile":
                    T.atomic_add(Out[base:base + bm, bx * bn:bx * bn + bn], x)
                else:
                    for i, j in T.Parallel(bm, bn):
                        if by * bm + i < M and bx * bn + j < N:
                            if op == "add":
                                T.atomic_add(Out[base + i, bx * bn + j], x[i, j])
                            elif op == "max":
                                T.atomic_max(Out[base + i, bx * bn + j], x[i, j])
                            else:
                                T.atomic_min(Out[base + i, bx * bn + j], x[i, j])

        return atomic

    def arguments(self, p, rng):
        dt = p["dtype"]
        x = uniform(rng, (p["M"], p["N"]), dt, -40, 40) if dt == "int32" else uniform(rng, (p["M"], p["N"]), dt)
        out = uniform(rng, (p["rows"] * p["block_M"], p["N"]), dt, -5, 5) if dt == "int32" else \
            uniform(rng, (p["rows"] * p["block_M"], p["N"]), dt)
        return [x, out]

    def expected(self, p, args):
        x, out = args[0].astype(np.float64), args[1].astype(np.float64).copy()
        bm, rows = p["block_M"], p["rows"]
        fn = {"add": np.add, "max": np.maximum, "min": np.minimum}[p["op"]]
        for r in range(p["M"]):
            by, i = divmod(r, bm)
            target = (by % rows) * bm + i
            out[target] = fn(out[target], x[r]) if p["op"] != "add" else out[target] + x[r]
        return {1: out}

    def tolerance(self, p):
        if p["dtype"] == "int32" or p["op"] != "add":
            return 0.0, 0.0
        return 1e-6, 1e-6 * math.ceil(p["M"] / p["block_M"])


class AtomicLanes:
    """T.atomic_addx2 / T.atomic_addx4 from a shared tile (upstream's form): vectors of
    consecutive elements, blocks colliding on the same output rows; the last vector of a
    ragged row is added element by element. float32 (float16 where the target has 16-bit
    atomics). On CUDA the vectors are vector atomics, with a fallback where misaligned (an
    odd column offset)."""
    name = "atomic_lanes"

    def draw(self, rng, target):
        lanes = pick(rng, [2, 4])
        bm, bn = pick(rng, [1, 4, 8]), pick(rng, [8, 16, 32])
        dtype = "float32" if lanes == 4 or target.split()[0] == "webgpu" else pick(rng, ["float32", "float16"])
        return dict(M=extent_with_tail(rng, bm, 3), N=extent_with_tail(rng, bn, 3), block_M=bm, block_N=bn,
                    lanes=lanes, rows=pick(rng, [1, 2, 5]), offset=pick(rng, [0, 0, 1]), dtype=dtype,
                    threads=pick(rng, [32, 64, 128]))

    def kernel(self, p):
        M, N, bm, bn, L, rows, off, dtype = (p["M"], p["N"], p["block_M"], p["block_N"], p["lanes"], p["rows"],
                                             p["offset"], p["dtype"])

        @T.prim_func
        def atomic_lanes(X: T.Tensor((M, N), dtype), Out: T.Tensor((rows * bm, N + off), dtype)):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=p["threads"]) as (bx, by):
                x = T.alloc_shared((bm, bn), dtype)
                T.copy(X[by * bm, bx * bn], x)
                base = (by % rows) * bm
                for i, j in T.Parallel(bm, bn // L):
                    col = bx * bn + j * L
                    if by * bm + i < M:
                        if col + L <= N:
                            if L == 2:
                                T.atomic_addx2(Out[base + i, off + col], x[i, j * L])
                            else:
                                T.atomic_addx4(Out[base + i, off + col], x[i, j * L])
                        else:
                            for k in T.serial(L):
                                if col + k < N:
                                    T.atomic_add(Out[base + i, off + col + k], x[i, j * L + k])

        return atomic_lanes

    def arguments(self, p, rng):
        shape = (p["rows"] * p["block_M"], p["N"] + p["offset"])
        return [uniform(rng, (p["M"], p["N"]), p["dtype"]), uniform(rng, shape, p["dtype"])]

    def expected(self, p, args):
        x, out = args[0].astype(np.float64), args[1].astype(np.float64).copy()
        bm, rows, off = p["block_M"], p["rows"], p["offset"]
        for r in range(p["M"]):
            by, i = divmod(r, bm)
            out[(by % rows) * bm + i, off:] += x[r]
        return {1: out}

    def tolerance(self, p):
        blocks = math.ceil(p["M"] / p["block_M"])
        return (1e-6, 1e-6 * blocks) if p["dtype"] == "float32" else (2e-3, 2e-3 * blocks)


class ShiftedReads:
    """A tile read part by part at offsets an enclosing loop sets, as DeepSeek's sparse MLA
    backward stores its accumulator (`for s in range(parts): for i, j in T.Parallel(bm, bn):
    if i < h: part[i, j] = acc[i + ((s + rot) % parts) * h, j]`): acc from a T.gemm (any warp
    policy) or a T.copy, the parts in a rotated order. Where the offsets move elements only
    between a thread's registers the reads stay there (the loop over s unrolled), else they
    go through shared memory."""
    name = "shifted_reads"

    def draw(self, rng, target):
        bm = pick(rng, [16, 32, 64])
        return dict(block_M=bm, block_N=pick(rng, [16, 32, 64]), K=pick(rng, [16, 32]), parts=pick(rng, [2, 4]),
                    rot=pick(rng, [0, 1]), source=pick(rng, ["gemm", "gemm", "copy"]),
                    policy=pick(rng, ["Square", "FullRow", "FullCol"]), threads=pick(rng, [32, 64, 128, 256]),
                    dtype=dtype_for(rng, target, ["float16", "bfloat16", "float32"]))

    def kernel(self, p):
        bm, bn, K, parts, rot, dtype = p["block_M"], p["block_N"], p["K"], p["parts"], p["rot"], p["dtype"]
        h = bm // parts
        policy = getattr(T.GemmWarpPolicy, p["policy"])
        from_gemm = p["source"] == "gemm"

        @T.prim_func
        def shifted_reads(A: T.Tensor((bm, K), dtype), B: T.Tensor((K, bn), dtype), X: T.Tensor((bm, bn), "float32"),
                          Out: T.Tensor((bm, bn), "float32")):
            with T.Kernel(1, threads=p["threads"]) as bx:
                A_s = T.alloc_shared((bm, K), dtype)
                B_s = T.alloc_shared((K, bn), dtype)
                part = T.alloc_shared((h, bn), "float32")
                acc = T.alloc_fragment((bm, bn), "float32")
                if from_gemm:
                    T.copy(A, A_s)
                    T.copy(B, B_s)
                    T.gemm(A_s, B_s, acc, clear_accum=True, policy=policy)
                else:
                    T.copy(X, acc)
                for s in range(parts):
                    for i, j in T.Parallel(bm, bn):
                        if i < h:
                            part[i, j] = acc[i + ((s + rot) % parts) * h, j]
                    T.copy(part, Out[s * h:(s + 1) * h, :])

        return shifted_reads

    def arguments(self, p, rng):
        bm, bn, K = p["block_M"], p["block_N"], p["K"]
        return [uniform(rng, (bm, K), p["dtype"]), uniform(rng, (K, bn), p["dtype"]),
                uniform(rng, (bm, bn), "float32"), np.full((bm, bn), np.nan, np.float32)]

    def expected(self, p, args):
        a, b, x = (v.astype(np.float64) for v in args[:3])
        acc = a @ b if p["source"] == "gemm" else x
        h, parts = p["block_M"] // p["parts"], p["parts"]
        order = [(s + p["rot"]) % parts for s in range(parts)]
        return {3: np.concatenate([acc[o * h:(o + 1) * h] for o in order])}

    def tolerance(self, p):
        # float32 inputs may run on tf32-free paths only (SIMT or float32 products): exact
        # products, rounded sums.
        return 1e-5, 4e-6 * p["K"]


class StageBuffers:
    """A shared buffer with a stage per iteration modulo m (`S[k % m]`), written every
    iteration (T.copy or T.Parallel) and read by other threads (reversed or rotated) from
    stage (k + d) % m: the row of iteration k - ((m - d) % m). Barriers must order each
    write after the reads of the iteration that last used its stage (the one before when
    d == 1), and may be left out at the body's end otherwise."""
    name = "stage_buffers"

    def draw(self, rng, target):
        stages = pick(rng, [1, 2, 2, 3, 4])
        return dict(n=int(rng.integers(1, 10)), stages=stages, d=int(rng.integers(0, stages)),
                    R=pick(rng, [1, 4, 8, 16]), W=pick(rng, [16, 32, 64, 128]), threads=pick(rng, [32, 64, 128, 256]),
                    write=pick(rng, ["copy", "parallel"]), perm=pick(rng, ["reverse", "rotate"]),
                    dtype=dtype_for(rng, target, ["float16", "float32"]))

    def kernel(self, p):
        n, m, d, R, W, dtype = p["n"], p["stages"], p["d"], p["R"], p["W"], p["dtype"]
        back = (m - d) % m
        rotate = p["perm"] == "rotate"

        @T.prim_func
        def stage_buffers(A: T.Tensor((n, R, W), dtype), Out: T.Tensor((R, W), "float32")):
            with T.Kernel(1, threads=p["threads"]) as bx:
                S = T.alloc_shared((m, R, W), dtype)
                acc = T.alloc_fragment((R, W), "float32")
                T.clear(acc)
                for k in T.serial(n):
                    if p["write"] == "copy":
                        T.copy(A[k, :, :], S[k % m, :, :])
                    else:
                        for r, c in T.Parallel(R, W):
                            S[k % m, r, c] = A[k, r, c] * 2
                    if k >= back:
                        for r, c in T.Parallel(R, W):
                            if rotate:
                                acc[r, c] += S[(k + d) % m, (r + 1) % R, (c + 3) % W]
                            else:
                                acc[r, c] += S[(k + d) % m, R - 1 - r, W - 1 - c]
                T.copy(acc, Out)

        return stage_buffers

    def arguments(self, p, rng):
        return [uniform(rng, (p["n"], p["R"], p["W"]), p["dtype"]), np.full((p["R"], p["W"]), np.nan, np.float32)]

    def expected(self, p, args):
        a = args[0].astype(np.float64) * (1 if p["write"] == "copy" else 2)
        back = (p["stages"] - p["d"]) % p["stages"]
        rows = a[:max(p["n"] - back, 0)].sum(0) if p["n"] > back else np.zeros(a.shape[1:])
        if p["perm"] == "rotate":
            return {1: np.roll(np.roll(rows, -1, axis=0), -3, axis=1)}
        return {1: rows[::-1, ::-1]}

    def tolerance(self, p):
        return 1e-5, 1e-5 * p["n"]


# ---------------------------------------------------------------------------- tiles loaded once a run

class RunTiles:
    """Work items taken in turn by B blocks (a persistent kernel): each item's tile X_i is
    copied once, then a pipelined loop of item-dependent length multiplies it by W's tiles:
    Out_i = X_i @ (W_0 + ... + W_{n_i - 1}), n_i = (i + shift) % 3 + t0 (0 for some items).
    On sm_90a the item's tile comes from the TMA producer (producer_tile_loads), in one or
    two buffers; elsewhere it is the threads' own copy."""
    name = "run_tiles"

    def draw(self, rng, target):
        return dict(items=int(rng.integers(1, 8)), blocks=pick(rng, [1, 2, 3]), t0=pick(rng, [0, 1, 2]),
                    shift=int(rng.integers(0, 3)), block_M=pick(rng, [16, 32, 64]), block_N=pick(rng, [16, 32, 64]),
                    block_K=pick(rng, [16, 32, 64]), num_stages=pick(rng, [1, 2, 3]), threads=pick(rng, [128, 256]),
                    dtype=dtype_for(rng, target, ["float16", "float16", "float32"]))

    @staticmethod
    def trips(p, i):
        return (i + p["shift"]) % 3 + p["t0"]

    def kernel(self, p):
        n, B, bm, bn, bk, dtype = p["items"], p["blocks"], p["block_M"], p["block_N"], p["block_K"], p["dtype"]
        most = max(self.trips(p, i) for i in range(n))
        t0, shift = p["t0"], p["shift"]

        @T.prim_func
        def run_tiles(X: T.Tensor((n * bm, bk), dtype), W: T.Tensor((max(most, 1) * bk, bn), dtype),
                      Out: T.Tensor((n * bm, bn), "float32")):
            with T.Kernel(B, threads=p["threads"]) as bid:
                x = T.alloc_shared((bm, bk), dtype)
                w = T.alloc_shared((bk, bn), dtype)
                acc = T.alloc_fragment((bm, bn), "float32")
                for i in T.Persistent([n], B, bid, 1):
                    T.copy(X[i * bm, 0], x)
                    T.clear(acc)
                    for k in T.Pipelined((i + shift) % 3 + t0, num_stages=p["num_stages"]):
                        T.copy(W[k * bk, 0], w)
                        T.gemm(x, w, acc)
                    T.copy(acc, Out[i * bm, 0])

        return run_tiles

    def arguments(self, p, rng):
        n, bm, bn, bk = p["items"], p["block_M"], p["block_N"], p["block_K"]
        most = max(self.trips(p, i) for i in range(n))
        return [uniform(rng, (n * bm, bk), p["dtype"]), uniform(rng, (max(most, 1) * bk, bn), p["dtype"]),
                np.full((n * bm, bn), np.nan, np.float32)]

    def expected(self, p, args):
        x, w = (a.astype(np.float64) for a in args[:2])
        bm, bk = p["block_M"], p["block_K"]
        out = np.zeros((p["items"] * bm, p["block_N"]))
        for i in range(p["items"]):
            for k in range(self.trips(p, i)):
                out[i * bm:(i + 1) * bm] += x[i * bm:(i + 1) * bm] @ w[k * bk:(k + 1) * bk]
        return {2: out}

    def tolerance(self, p):
        return 1e-5, 4e-6 * p["block_K"] * (2 + p["t0"])


# ---------------------------------------------------------------------------- branches over warpgroups

class Branches:
    """Upstream's hand warp specialisation: `tx = T.get_thread_binding()`, then branches
    over whole warpgroups (if / else, elif, a conjunction, a test of a scalar too); one
    branch moves a fragment of its own through tile operators, the other writes element
    by element. GPU targets only: the CPU runs a block as one thread."""
    name = "branches"
    targets = ("webgpu", "cuda")

    def draw(self, rng, target):
        threads = pick(rng, [128, 256] if target == "webgpu" else [128, 256, 384, 512])
        split = 128 * int(rng.integers(1, threads // 128)) if threads > 128 else 128
        return dict(threads=threads, split=split, blocks=pick(rng, [1, 2, 3]),
                    form=pick(rng, ["else", "elif", "and", "uniform"]), n=pick(rng, [64, 128, 256, 512, 1024]),
                    scale=pick(rng, [2.0, -0.5, 3.0]), on=pick(rng, [0, 1, 1]),
                    reduce=target != "webgpu" and bool(rng.integers(0, 2)))

    def kernel(self, p):
        threads, s, n, form, scale, blocks = p["threads"], p["split"], p["n"], p["form"], p["scale"], p["blocks"]
        rest = threads - s  # threads after the split: one element each
        width = n + max(rest, 0)
        reduce = p["reduce"]

        @T.macro
        def tile_work(X, Y, S, F, G, r, bx):  # the first branch: a fragment's tile operators
            T.copy(X[bx, 0:n], F)
            for i in T.Parallel(n):
                F[i] = F[i] * scale + 1.0
            T.copy(F, Y[bx, 0:n])
            if reduce:
                for i, j in T.Parallel(8, n // 8):
                    G[i, j] = X[bx, i * (n // 8) + j]
                T.reduce_sum(G, r, dim=1)
                T.copy(r, S[bx, 0:8])

        @T.prim_func
        def branches(X: T.Tensor((blocks, width), "float32"), Y: T.Tensor((blocks, width), "float32"),
                     S: T.Tensor((blocks, 8), "float32"), on: T.int32):
            with T.Kernel(blocks, threads=threads) as bx:
                tx = T.get_thread_binding()
                F = T.alloc_fragment((n,), "float32")
                G = T.alloc_fragment((8, n // 8), "float32")
                r = T.alloc_fragment((8,), "float32")
                if form == "else":
                    if tx < s:
                        tile_work(X, Y, S, F, G, r, bx)
                    else:
                        Y[bx, n + tx - s] = X[bx, n + tx - s] * 2.0 - 1.0
                elif form == "elif":
                    if tx >= s:
                        Y[bx, n + tx - s] = X[bx, n + tx - s] * 2.0 - 1.0
                    elif tx < s:
                        tile_work(X, Y, S, F, G, r, bx)
                else:  # "and" / "uniform": two branches written as separate ifs
                    if form == "and":
                        if 0 <= tx and s > tx:
                            tile_work(X, Y, S, F, G, r, bx)
                    else:
                        if tx < s and on > 0:
                            tile_work(X, Y, S, F, G, r, bx)
                    if tx >= s and tx < threads:
                        Y[bx, n + tx - s] = X[bx, n + tx - s] * 2.0 - 1.0

        return branches

    def _width(self, p):
        return p["n"] + max(p["threads"] - p["split"], 0)

    def arguments(self, p, rng):
        w = self._width(p)
        x = uniform(rng, (p["blocks"], w), "float32")
        return [x, np.full((p["blocks"], w), np.nan, np.float32), np.full((p["blocks"], 8), np.nan, np.float32),
                p["on"]]

    def expected(self, p, args):
        x = args[0].astype(np.float64)
        n, w = p["n"], self._width(p)
        y, sums = args[1].astype(np.float64).copy(), args[2].astype(np.float64).copy()
        first = p["form"] != "uniform" or p["on"] > 0
        if first:
            y[:, :n] = x[:, :n] * p["scale"] + 1.0
            if p["reduce"]:
                sums[:] = x[:, :n].reshape(p["blocks"], 8, n // 8).sum(axis=2)
        y[:, n:w] = x[:, n:w] * 2.0 - 1.0
        return {1: y, 2: sums}

    def tolerance(self, p):
        return 1e-5, 1e-5 * p["n"]


class ThreadLevel:
    """Thread-level code as upstream's SIMT examples write it (T.get_thread_binding, serial
    loops, shared memory by element): y = B x with one thread a row (x along threads' y
    for split-K). The chunk of x is staged in shared memory by every thread (the same
    elements), by one thread each (its own element, read by all), or not at all; the row of
    B through a thread's own shared row or straight from global memory; split-K partial sums
    meet in shared memory by atomics after an initialisation by one thread of each row.
    Barriers are the compiler's (a missing one was a silent wrong answer). GPU targets
    only: the CPU runs a block as one thread."""
    name = "thread_level"
    targets = ("webgpu", "cuda")

    def draw(self, rng, target):
        bn = pick(rng, [8, 16, 32, 64])
        split = pick(rng, [1, 1, 2, 4]) if bn <= 32 else 1
        bk = pick(rng, [8, 16, 32])
        return dict(bn=bn, split=split, bk=bk, chunks=pick(rng, [1, 2, 3]), blocks=pick(rng, [1, 2, 3]),
                    stage_x=pick(rng, ["all", "own", "none"]), stage_b=bool(rng.integers(0, 2)))

    def kernel(self, p):
        bn, split, bk, blocks = p["bn"], p["split"], p["bk"], p["blocks"]
        k_total = bk * split * p["chunks"]
        n = bn * blocks
        stage_x, stage_b = p["stage_x"], p["stage_b"]
        per = bk  # elements of a chunk each split-K thread handles

        @T.prim_func
        def thread_level(x: T.Tensor((k_total,), "float32"), B: T.Tensor((n, k_total), "float32"),
                         y: T.Tensor((n,), "float32")):
            with T.Kernel(blocks, threads=(bn, split)) as b:
                tn = T.get_thread_binding(0)
                tk = T.get_thread_binding(1)
                x_s = T.alloc_shared((split, bk), "float32")
                B_s = T.alloc_shared((bn, split, bk), "float32")
                total = T.alloc_shared((bn,), "float32")
                acc = T.alloc_local((1,), "float32")
                if tk == 0:
                    total[tn] = 0.0
                T.clear(acc)
                for c in T.serial(p["chunks"]):
                    base = (c * split + tk) * per
                    if stage_x == "all":
                        for t in T.serial(per):
                            x_s[tk, t] = x[base + t]
                    elif stage_x == "own":
                        for t in T.serial(per // bn if per >= bn else 1):
                            if tn + t * bn < per:
                                x_s[tk, tn + t * bn] = x[base + tn + t * bn]
                    if stage_b:
                        for t in T.serial(per):
                            B_s[tn, tk, t] = B[b * bn + tn, base + t]
                    for t in T.serial(per):
                        xv = x[base + t] if stage_x == "none" else x_s[tk, t]
                        bv = B_s[tn, tk, t] if stage_b else B[b * bn + tn, base + t]
                        acc[0] += xv * bv
                T.atomic_add(total[tn], acc[0])
                if tk == 0:
                    y[b * bn + tn] = total[tn]

        return thread_level

    def arguments(self, p, rng):
        k_total = p["bk"] * p["split"] * p["chunks"]
        n = p["bn"] * p["blocks"]
        return [uniform(rng, (k_total,), "float32"), uniform(rng, (n, k_total), "float32"),
                np.full((n,), np.nan, np.float32)]

    def expected(self, p, args):
        return {2: args[1].astype(np.float64) @ args[0].astype(np.float64)}

    def tolerance(self, p):
        return 1e-5, 1e-5 * p["bk"] * p["split"] * p["chunks"]


class AllReduce:
    """TVM's thread all-reduce as upstream's SIMT programs write it (T.comm_reducer +
    T.tvm_thread_allreduce): a block of threads along up to three axes (extents powers of
    two or not), the group along a random set of them (shuffles inside warps and shared
    memory across them, or shared memory alone), sum or max of float32 or int32, called
    in a loop so that the exchange is reused. GPU targets only (the CPU has no threads)."""
    name = "allreduce"
    targets = ("webgpu", "cuda")

    def draw(self, rng, target):
        limit = 256 if target == "webgpu" else 1024
        while True:
            dims = [pick(rng, [1, 2, 4, 8, 16, 32, 64, 3, 12]), pick(rng, [1, 2, 4, 8, 3, 6]), pick(rng, [1, 1, 2, 3])]
            if math.prod(dims) <= limit and math.prod(dims) >= 2:
                break
        axes = [d for d in range(3) if rng.integers(0, 2)] or [int(rng.integers(0, 3))]
        return dict(dims=dims, axes=axes, op=pick(rng, ["sum", "max"]), dtype=pick(rng, ["float32", "int32"]),
                    rounds=pick(rng, [1, 2]), blocks=pick(rng, [1, 2]))

    def kernel(self, p):
        dims, axes, op, dtype, rounds, blocks = p["dims"], p["axes"], p["op"], p["dtype"], p["rounds"], p["blocks"]
        n = math.prod(dims)
        identity = 0 if dtype == "int32" else 0.0
        lowest = -(2 ** 31) if dtype == "int32" else -T.infinity(dtype)

        @T.prim_func
        def allreduce(X: T.Tensor((blocks, n), dtype), Y: T.Tensor((blocks, rounds, n), dtype)):
            with T.Kernel(blocks, threads=tuple(dims)) as b:
                tx = T.get_thread_binding(0)
                ty = T.get_thread_binding(1)
                tz = T.get_thread_binding(2)
                names = (tx, ty, tz)
                lin = tx + ty * dims[0] + tz * dims[0] * dims[1]
                out = T.alloc_local((1,), dtype)
                for r in T.serial(rounds):
                    reducer = (T.comm_reducer(lambda a, c: a + c, [T.Cast(dtype, identity)]) if op == "sum"
                               else T.comm_reducer(lambda a, c: T.max(a, c), [T.Cast(dtype, lowest)]))
                    with T.attr(reducer, "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), X[b, lin] + T.Cast(dtype, r), True, out[0],
                                                          *[names[d] for d in axes], dtype="handle"))
                    Y[b, r, lin] = out[0]

        return allreduce

    def arguments(self, p, rng):
        n = math.prod(p["dims"])
        x = uniform(rng, (p["blocks"], n), p["dtype"], -8, 8) if p["dtype"] == "int32" else \
            uniform(rng, (p["blocks"], n), "float32")
        return [x, np.zeros((p["blocks"], p["rounds"], n), NP[p["dtype"]])]

    def expected(self, p, args):
        x = args[0].astype(np.float64)
        dims = p["dims"]
        want = np.empty((p["blocks"], p["rounds"], math.prod(dims)))
        for r in range(p["rounds"]):
            v = (x + r).reshape(p["blocks"], dims[2], dims[1], dims[0])  # [b, z, y, x]
            axes = tuple(3 - d for d in p["axes"])
            red = v.sum(axis=axes, keepdims=True) if p["op"] == "sum" else v.max(axis=axes, keepdims=True)
            want[:, r] = np.broadcast_to(red, v.shape).reshape(p["blocks"], -1)
        return {1: want}

    def tolerance(self, p):
        return (1e-5, 1e-5 * math.prod(p["dims"])) if p["dtype"] == "float32" else (0, 0)


class Reducer:
    """T.alloc_reducer in the forms programs write: contributions from a T.Parallel over a tile
    (by row, by column), from a replicated row-maximum fragment (each logical iteration once),
    over 1-3 serial passes; a starting value or not; the current form (T.reducer_update, then
    T.finalize_reducer into a fragment) or the older one (T.clear / T.fill, `acc[r] op= v`, in
    place). Each of 2 blocks reduces its own tile into its own output row."""
    name = "reducer"

    def draw(self, rng, target):
        dtype = dtype_for(rng, target, ["float32", "float32", "int32"])
        ops = ["sum", "max", "min"] + (["bitor"] if dtype == "int32" else [])
        return dict(block_M=pick(rng, [4, 16, 32, 64]), block_N=pick(rng, [8, 16, 32]), R=pick(rng, [1, 3, 8, 32]),
                    op=pick(rng, ops), dtype=dtype, source=pick(rng, ["rows", "cols", "row_max"]),
                    passes=pick(rng, [1, 2, 3]), start=pick(rng, [None, None, 2]), form=pick(rng, ["current", "older"]),
                    threads=pick(rng, [32, 64, 128, 256]))

    def kernel(self, p):
        bm, bn, R, op, dtype, source, passes = (p["block_M"], p["block_N"], p["R"], p["op"], p["dtype"], p["source"],
                                               p["passes"])
        start, older = p["start"], p["form"] == "older"

        def combine(acc, v):
            return {"sum": lambda: acc + v, "max": lambda: T.max(acc, v), "min": lambda: T.min(acc, v),
                    "bitor": lambda: T.bitwise_or(acc, v)}[op]()

        @T.prim_func
        def reducer(X: T.Tensor((2, passes, bm, bn), dtype), Out: T.Tensor((2, R), dtype)):
            with T.Kernel(2, threads=p["threads"]) as bx:
                x = T.alloc_fragment((bm, bn), dtype)
                row = T.alloc_fragment((bm,), dtype)
                acc = T.alloc_reducer((R,), dtype, op=op)
                if older:
                    if start is None and op == "sum":
                        T.clear(acc)
                    else:
                        T.fill(acc, start if start is not None else
                               {"max": -1000000, "min": 1000000, "sum": 0, "bitor": 0}[op])
                else:
                    T.reducer_init(acc, start)
                for s in T.serial(passes):
                    T.copy(X[bx, s, :, :], x)
                    if source == "row_max":
                        T.reduce_max(x, row, dim=1)
                        for i in T.Parallel(bm):
                            if older:
                                acc[i % R] = combine(acc[i % R], row[i])
                            else:
                                T.reducer_update(acc[i % R], row[i])
                    else:
                        for i, j in T.Parallel(bm, bn):
                            r = i % R if source == "rows" else j % R
                            if older:
                                acc[r] = combine(acc[r], x[i, j])
                            else:
                                T.reducer_update(acc[r], x[i, j])
                if older:
                    T.finalize_reducer(acc)
                    for r in T.Parallel(R):
                        Out[bx, r] = acc[r]
                else:
                    out = T.alloc_fragment((R,), dtype)
                    T.finalize_reducer(acc, out)
                    T.copy(out, Out[bx, :])

        return reducer

    def arguments(self, p, rng):
        shape = (2, p["passes"], p["block_M"], p["block_N"])
        if p["dtype"] == "int32":
            x = rng.integers(0, 1 << 20, size=shape).astype(np.int32) if p["op"] == "bitor" else \
                rng.integers(-50, 50, size=shape).astype(np.int32)
        else:
            x = uniform(rng, shape, "float32")
        return [x, np.full((2, p["R"]), np.nan if p["dtype"] == "float32" else -7, dtype=NP[p["dtype"]])]

    def expected(self, p, args):
        x = args[0].astype(np.float64) if p["dtype"] == "float32" else args[0].astype(np.int64)
        R, op = p["R"], p["op"]
        ufunc = {"sum": np.add, "max": np.maximum, "min": np.minimum, "bitor": np.bitwise_or}[op]
        start = p["start"]
        if start is None:
            start = {"max": -1000000, "min": 1000000}.get(op, 0) if p["form"] == "older" else None
        out = np.zeros((2, R), dtype=x.dtype)
        big = np.inf if p["dtype"] == "float32" else None
        identity = {"sum": 0, "bitor": 0, "max": -big if big else np.iinfo(np.int32).min,
                    "min": big if big else np.iinfo(np.int32).max}[op]
        for b in range(2):
            if p["source"] == "row_max":
                vals = x[b].max(axis=2)  # [passes, rows]
                keys = np.broadcast_to(np.arange(p["block_M"]) % R, vals.shape)
            elif p["source"] == "rows":
                vals = x[b]
                keys = np.broadcast_to((np.arange(p["block_M"]) % R)[:, None], vals.shape)
            else:
                vals = x[b]
                keys = np.broadcast_to(np.arange(p["block_N"]) % R, vals.shape)
            for r in range(R):
                sel = vals[keys == r]
                total = ufunc.reduce(sel) if sel.size else None
                if start is not None:
                    total = start if total is None else ufunc(total, start)
                out[b, r] = total if total is not None else identity  # an element nothing adds to
        return {1: out}

    def tolerance(self, p):
        if p["dtype"] == "int32" or p["op"] != "sum":
            return 0.0, 0.0
        return 1e-5, 1e-5 * p["passes"] * p["block_M"] * p["block_N"] / p["R"]


TEMPLATES = {t.name: t for t in (Gemm(), Reduce(), Elementwise(), Copy(), Cumsum(), Softmax(), Pipeline(), Atomic(),
                                 AtomicLanes(), Branches(), ThreadLevel(), AllReduce(), ShiftedReads(),
                                 StageBuffers(), RunTiles(), Reducer())}
