"""Several T.gemm in a row on sm_90a (transform/overlap_wgmma_groups.cc): independent products
issued back to back, each waited for only before its result is used or an operand rewritten;
the numbers are the same on every target."""
import re

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C

from sass import sass_of
from sm90 import require_sm90

SM90 = "cuda -arch=sm_90a"


def two_products(M=128, N=64, K=64, L=64, steps=3, stages=2, threads=128):
    """Per step i: S = A_i B^T (halved), D = A_i C^T (independent of S's halving), then
    B's shared tile negated (an operand rewritten after the products that read it), and
    O += (S + D) V with S + D in registers."""

    @T.prim_func
    def main(A: T.Tensor((steps * M, K), "float16"), B: T.Tensor((N, K), "float16"),
             C: T.Tensor((N, K), "float16"), V: T.Tensor((N, L), "float16"), O: T.Tensor((M, L), "float32")):
        with T.Kernel(1, threads=threads):
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((N, K), "float16")
            C_s = T.alloc_shared((N, K), "float16")
            V_s = T.alloc_shared((N, L), "float16")
            S = T.alloc_fragment((M, N), "float32")
            D = T.alloc_fragment((M, N), "float32")
            E = T.alloc_fragment((M, N), "float16")
            acc = T.alloc_fragment((M, L), "float32")
            T.copy(B, B_s)
            T.copy(C, C_s)
            T.copy(V, V_s)
            T.clear(acc)
            for i in T.Pipelined(steps, num_stages=stages):
                T.copy(A[i * M:(i + 1) * M, :], A_s)
                T.gemm(A_s, B_s, S, transpose_B=True, clear_accum=True)
                for a, b in T.Parallel(M, N):
                    S[a, b] = S[a, b] * 0.5
                T.gemm(A_s, C_s, D, transpose_B=True, clear_accum=True)
                for n, k in T.Parallel(N, K):
                    B_s[n, k] = -B_s[n, k]
                for a, b in T.Parallel(M, N):
                    E[a, b] = S[a, b] + D[a, b]
                T.gemm(E, V_s, acc)
            T.copy(acc, O)

    return main


def reference(a, b, c, v, steps, M):
    out = np.zeros((M, v.shape[1]), np.float64)
    b = b.astype(np.float32)
    for i in range(steps):
        ai = a[i * M:(i + 1) * M].astype(np.float32)
        e = (ai @ b.T * 0.5 + ai @ c.astype(np.float32).T).astype(np.float16)
        out += e.astype(np.float64) @ v.astype(np.float64)
        b = -b
    return out


def test_two_products_numerics(target, rng):
    if target.startswith("cuda"):
        require_sm90(target)
    steps, M = 3, 128
    kernel = tilelang.compile(two_products(steps=steps), out_idx=[4], target=target)
    a, b, c, v = (rng.standard_normal(s).astype(np.float16) * 0.25
                  for s in ((steps * M, 64), (64, 64), (64, 64), (64, 64)))
    if target.startswith("cuda"):
        import torch
        out = kernel(*(torch.from_numpy(x).cuda() for x in (a, b, c, v))).cpu().numpy()
    else:
        out = np.asarray(kernel(a, b, c, v))
    ref = reference(a, b, c, v, steps, M)
    err = float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
    assert err < 5e-3, err


def _report(switches=()):
    return _C.lower(two_products().handle, SM90, list(switches)).lowering_report()


def test_report_names_each_move_and_wait():
    report = _report()
    lines = [line for line in report.splitlines() if "T.gemm into" in line]
    src = __file__
    text = "\n".join(lines)
    # D = A C^T moves above the halving of S, which does not touch its operands.
    assert re.search(re.escape(src) + r":\d+: T.gemm into D issued before the statements at line \d+, which do not "
                     r"touch its operands", text), text
    # S is waited for before its halving with D still in flight; D before S + D; the last
    # product before the loop body releases its pipeline stage (a call).
    assert re.search(r"T.gemm into S waited for before line \d+, which uses its result or rewrites an operand "
                     r"\(1 later group stays in flight\)", text), text
    assert re.search(r"T.gemm into D waited for before line \d+, which uses its result or rewrites an operand$",
                     text, re.M), text
    assert re.search(r"T.gemm into acc waited for before line \d+, a barrier, wait or call", text), text


def test_switch_off_waits_after_each_product():
    report = _report(["tl.disable_wgmma_overlap"])
    assert "T.gemm into" not in report, report


def test_products_issued_back_to_back_in_sass():
    sass, _, _ = sass_of(two_products())
    ops = [m.group(1) for m in re.finditer(r"\b(HGMMA\.\S+|WARPGROUP\.DEPBAR\.LE[^;]*|WARPGROUP\.ARRIVE)", sass)]
    groups = []  # per wgmma group: the waits just before it
    waits = []
    for op in ops:
        if op.startswith("WARPGROUP.DEPBAR"):
            waits.append(op)
        elif op == "WARPGROUP.ARRIVE":
            groups.append(waits)
            waits = []
    # Inside the loop: S's group, then D's with no wait between (ptxas adds none: the
    # clear is wgmma's scale-d, not register writes), then acc's after the waits.
    assert len(groups) >= 3, ops
    assert any(not g for g in groups[1:]), ops


def two_into_one(M=64, N=64, K1=128, K2=64, steps=2):
    """Per step: S = A_i B^T + C_i D^T (two products into one accumulator, like MLA's scores
    from the latent and the rotary parts), then O += S."""

    @T.prim_func
    def main(A: T.Tensor((steps * M, K1), "float16"), B: T.Tensor((N, K1), "float16"),
             C: T.Tensor((steps * M, K2), "float16"), D: T.Tensor((N, K2), "float16"),
             O: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, K1), "float16")
            B_s = T.alloc_shared((N, K1), "float16")
            C_s = T.alloc_shared((M, K2), "float16")
            D_s = T.alloc_shared((N, K2), "float16")
            S = T.alloc_fragment((M, N), "float32")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(B, B_s)
            T.copy(D, D_s)
            T.clear(acc)
            for i in T.Pipelined(steps, num_stages=2):
                T.copy(A[i * M:(i + 1) * M, :], A_s)
                T.copy(C[i * M:(i + 1) * M, :], C_s)
                T.gemm(A_s, B_s, S, transpose_B=True, clear_accum=True)
                T.gemm(C_s, D_s, S, transpose_B=True)
                for a, b in T.Parallel(M, N):
                    acc[a, b] += S[a, b]
            T.copy(acc, O)

    return main


def test_two_products_into_one_accumulator_numerics(target, rng):
    if target.startswith("cuda"):
        require_sm90(target)
    steps = 2
    kernel = tilelang.compile(two_into_one(steps=steps), out_idx=[4], target=target)
    a, b, c, d = (rng.standard_normal(s).astype(np.float16) * 0.25
                  for s in ((steps * 64, 128), (64, 128), (steps * 64, 64), (64, 64)))
    if target.startswith("cuda"):
        import torch
        out = kernel(*(torch.from_numpy(x).cuda() for x in (a, b, c, d))).cpu().numpy()
    else:
        out = np.asarray(kernel(a, b, c, d))
    f = lambda x: x.astype(np.float64)  # noqa: E731
    ref = sum(f(a[i * 64:(i + 1) * 64]) @ f(b).T + f(c[i * 64:(i + 1) * 64]) @ f(d).T for i in range(steps))
    err = float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
    assert err < 1e-3, err


def test_second_product_into_the_same_accumulator_is_not_waited_for():
    report = _C.lower(two_into_one().handle, SM90).lowering_report()
    assert re.search(r"T.gemm into S adds to the accumulator of the T.gemm at line \d+ while that one runs",
                     report), report
    sass, _, _ = sass_of(two_into_one())
    ops = re.findall(r"\b(HGMMA\.\S+|WARPGROUP\.DEPBAR|WARPGROUP\.ARRIVE)", sass)
    first = ops.index("WARPGROUP.ARRIVE")
    second = ops.index("WARPGROUP.ARRIVE", first + 1)
    assert "WARPGROUP.DEPBAR" not in ops[first:second], ops
