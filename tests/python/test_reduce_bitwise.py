"""T.reduce_bitand / bitor / bitxor and T.reduce(buffer, out, reduce_type, ...): rows and
columns of an integer tile, a whole tile into one value, with clear=False, against numpy on
the targets here and, for the GPU lowering (lanes combined by shuffles, warps through shared
memory), through the HIP emulation; float buffers are a type error."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangTypeError

from hip_emulation import EmulatedKernel, toolchain_problem

NUMPY = {"bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor}


def rows_and_cols(kind, M=32, N=64, clear=True, dtype="int32", threads=128):
    """Rows[i] = kind over X[i, :] (combined with Init when clear=False); Cols[j] = kind
    over X[:, j]; Whole[0] = kind over all of X (by T.reduce with the type as a string)."""

    @T.prim_func
    def reduce_bits(X: T.Tensor((M, N), dtype), Init: T.Tensor((M,), dtype), Rows: T.Tensor((M,), dtype),
                    Cols: T.Tensor((N,), dtype), Whole: T.Tensor((1,), dtype)):
        with T.Kernel(1, threads=threads) as bx:
            x = T.alloc_fragment((M, N), dtype)
            rows = T.alloc_fragment((M,), dtype)
            cols = T.alloc_fragment((N,), dtype)
            flat = T.alloc_fragment((M * N,), dtype)
            whole = T.alloc_fragment((1,), dtype)
            T.copy(X, x)
            if not clear:
                T.copy(Init, rows)
            getattr(T, f"reduce_{kind}")(x, rows, dim=1, clear=clear)
            getattr(T, f"reduce_{kind}")(x, cols, dim=0)
            for i, j in T.Parallel(M, N):
                flat[i * N + j] = x[i, j]
            T.reduce(flat, whole, kind, 0, True)
            T.copy(rows, Rows)
            T.copy(cols, Cols)
            T.copy(whole, Whole)

    return reduce_bits


def inputs(rng, M=32, N=64):
    x = rng.integers(0, 2 ** 31 - 1, (M, N), dtype=np.int64).astype(np.int32)
    x |= rng.integers(0, 2, (M, N)).astype(np.int32) * 0x10  # and-reductions keep some bits
    return x, rng.integers(0, 2 ** 31 - 1, M, dtype=np.int64).astype(np.int32)


def check(kind, x, init, rows, cols, whole, clear):
    f = NUMPY[kind]
    want_rows = f.reduce(x, axis=1)
    if not clear:
        want_rows = f(want_rows, init)
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_array_equal(cols, f.reduce(x, axis=0))
    assert whole[0] == f.reduce(x.ravel())


@pytest.mark.parametrize("clear", [True, False])
@pytest.mark.parametrize("kind", sorted(NUMPY))
def test_bitwise_reductions(target, rng, kind, clear):
    k = tilelang.compile(rows_and_cols(kind, clear=clear), target=target)
    x, init = inputs(rng)
    rows, cols, whole = np.zeros(32, np.int32), np.zeros(64, np.int32), np.zeros(1, np.int32)
    k(x, init, rows, cols, whole)
    check(kind, x, init, rows, cols, whole, clear)


@pytest.mark.skipif(toolchain_problem() is not None, reason=str(toolchain_problem()))
@pytest.mark.parametrize("kind", sorted(NUMPY))
def test_bitwise_reductions_through_the_hip_emulation(rng, kind):
    # xor counts each element once: a tile held by several threads must not cancel itself.
    kernel = EmulatedKernel(rows_and_cols(kind, clear=False), "gfx942")
    x, init = inputs(rng)
    rows, cols, whole = np.zeros(32, np.int32), np.zeros(64, np.int32), np.zeros(1, np.int32)
    kernel(x, init, rows, cols, whole)
    check(kind, x, init, rows, cols, whole, False)


def test_float_buffer_is_a_type_error():
    @T.prim_func
    def bad(X: T.Tensor((4, 8), "float32"), Y: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            x = T.alloc_fragment((4, 8), "float32")
            y = T.alloc_fragment((4,), "float32")
            T.copy(X, x)
            T.reduce_bitor(x, y, dim=1)
            T.copy(y, Y)

    with pytest.raises(TileLangTypeError, match="T.reduce_bitor needs integer \\(or bool\\) buffers; x is float32"):
        tilelang.compile(bad, target="cpu")


def test_unknown_reduce_type():
    with pytest.raises(TileLangTypeError, match="T.reduce: unknown reduce_type 'prod'"):
        @T.prim_func
        def bad(X: T.Tensor((8,), "int32"), Y: T.Tensor((1,), "int32")):
            with T.Kernel(1, threads=32) as bx:
                T.reduce(X, Y, "prod", 0, True)


@pytest.mark.parametrize("kind", sorted(NUMPY))
def test_cuda_source_compiles(kind):
    from sass import nvrtc_reason
    from tilelang import _C
    from tilelang.jit.kernel import _include_dir
    if nvrtc_reason():
        pytest.skip(f"NVRTC is not available: {nvrtc_reason()}")
    target = "cuda -arch=sm_90a"
    source = _C.codegen(_C.lower(rows_and_cols(kind, clear=False).handle, target), target)
    assert _C.nvrtc_compile(source, "bits.cu", "sm_90a", [_include_dir()])[:4] == b"\x7fELF"
