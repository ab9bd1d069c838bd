"""`while` on a kernel value and T.loop_break(), as upstream's stream-K GEMM and top-k
selector write them: per element inside T.Parallel, at block level around cooperative work
(tile operators, T.Parallel loops over shared memory), and leaving a T.serial loop early.
Numerics against numpy on every target; the misuse errors with their lines."""
import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangSyntaxError

RNG = np.random.default_rng(11)


def test_while_per_element(target):
    # Halve each value until it is below 1, counting the halvings.
    @T.prim_func
    def halvings(A: T.Tensor((256,), "float32"), N: T.Tensor((256,), "int32")):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                v = T.alloc_var("float32")
                n = T.alloc_var("int32")
                v = A[bx * 128 + i]
                n = 0
                while v >= 1.0:
                    v = v * 0.5
                    n += 1
                N[bx * 128 + i] = n

    a = RNG.uniform(0, 1000, 256).astype(np.float32)
    n = np.zeros(256, np.int32)
    tilelang.compile(halvings, target=target)(a, n)
    expected = np.array([0 if x < 1 else int(np.floor(np.log2(x))) + 1 for x in a.astype(np.float64)])
    np.testing.assert_array_equal(n, expected)


def test_while_around_cooperative_work(target):
    # Stream-K's shape: a block walks tiles start[0] .. stop - 1 of its share, each tile
    # through a shared buffer and a fragment, the walk driven by a local counter.
    tiles, rows = 10, 32

    @T.prim_func
    def walk(A: T.Tensor((tiles * rows, 64), "float32"), B: T.Tensor((tiles * rows, 64), "float32")):
        with T.Kernel(3, threads=128) as bx:
            S = T.alloc_shared((rows, 64), "float32")
            F = T.alloc_fragment((rows, 64), "float32")
            start = T.alloc_local((1,), "int32")
            start[0] = bx * 4
            stop = T.min(bx * 4 + 4, tiles)
            while start[0] < stop:
                T.copy(A[start[0] * rows, 0], S)
                for i, j in T.Parallel(rows, 64):
                    F[i, j] = S[i, j] * 2.0 + T.Cast("float32", start[0])
                T.copy(F, B[start[0] * rows, 0])
                start[0] = start[0] + 1

    a = RNG.standard_normal((tiles * rows, 64)).astype(np.float32)
    b = np.zeros_like(a)
    tilelang.compile(walk, target=target)(a, b)
    expected = a * 2 + np.repeat(np.arange(tiles, dtype=np.float32), rows)[:, None]
    np.testing.assert_allclose(b, expected, rtol=1e-6, atol=1e-6)


def test_loop_break_leaves_a_serial_loop(target):
    # Adds rows into an accumulator until the running total of the first column turns
    # negative (that row included), as the top-k selector stops its passes early.
    @T.prim_func
    def until_negative(A: T.Tensor((16, 32), "float32"), B: T.Tensor((32,), "float32"),
                       Used: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            acc = T.alloc_shared((32,), "float32")
            used = T.alloc_local((1,), "int32")
            T.clear(acc)
            used[0] = 0
            for r in T.serial(16):
                for j in T.Parallel(32):
                    acc[j] += A[r, j]
                used[0] = r + 1
                if acc[0] < 0:
                    T.loop_break()
            T.copy(acc, B)
            Used[0] = used[0]

    a = RNG.standard_normal((16, 32)).astype(np.float32)
    a[:, 0] = [0.5, 0.25, -0.1, -1.0] + [0.1] * 12
    b = np.zeros(32, np.float32)
    used = np.zeros(1, np.int32)
    tilelang.compile(until_negative, target=target)(a, b, used)
    assert used[0] == 4
    np.testing.assert_allclose(b, a[:4].sum(axis=0), rtol=1e-5, atol=1e-6)


def test_loop_break_misuse_is_refused():
    with pytest.raises(TileLangSyntaxError, match=r"T\.loop_break\(\) inside a T\.Parallel loop"):
        @T.prim_func
        def in_parallel(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(32):
                    if A[i] < 0:
                        T.loop_break()

    with pytest.raises(TileLangSyntaxError, match=r"T\.loop_break\(\) outside a kernel loop"):
        @T.prim_func
        def outside(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                if A[0] < 0:
                    T.loop_break()

    with pytest.raises(TileLangSyntaxError, match=r"'break' in a kernel loop") as info:
        @T.prim_func
        def python_break(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                for k in T.serial(4):
                    break
    assert "T.loop_break()" in str(info.value)
