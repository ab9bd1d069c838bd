"""T.reshape and T.view: buffers over another buffer's storage, with another shape (and for
T.view another dtype). Numerics against numpy on every target; the CUDA path compiled
without a GPU; the errors of bad calls, located at the call."""
import inspect
import os

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C
from tilelang.errors import TileLangShapeError, TileLangTypeError, TileLangUnsupportedError
from tilelang.jit.kernel import _include_dir
from sass import nvrtc_reason

RNG = np.random.default_rng(7)


def global_reshape(N=512, M=32):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N // M, M), "float32")):
        with T.Kernel(N // M // 4, threads=128) as bx:
            A2 = T.reshape(A, (N // M, M))
            T.copy(A2[bx * 4:(bx + 1) * 4, :], B[bx * 4:(bx + 1) * 4, :])
    return main


def shared_reshape(N=256, M=16):
    # The tile is filled as (N,), read back as (N // M, M) after the threads swapped roles.
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N // M, M), "float32")):
        with T.Kernel(1, threads=64) as bx:
            S = T.alloc_shared((N,), "float32")
            T.copy(A, S)
            S2 = T.reshape(S, (N // M, M))
            for i, j in T.Parallel(N // M, M):
                S2[i, j] = S2[i, j] * 2.0 + j
            T.copy(S2, B)
    return main


def view_halves_as_words(N=128, dtype="int32"):
    # Pairs of float16 read as one 32-bit word: the bits of A.view(dtype) in numpy.
    @T.prim_func
    def main(A: T.Tensor((N,), "float16"), B: T.Tensor((N // 2,), dtype)):
        with T.Kernel(1, threads=64) as bx:
            W = T.view(A, (N // 2,), dtype)
            for i in T.Parallel(N // 2):
                B[i] = W[i]
    return main


def view_words(N=256, M=32, src="float32", dst="int32"):
    # A shared tile written as float32 through one name and read as int32 bits through another.
    @T.prim_func
    def main(A: T.Tensor((N,), src), B: T.Tensor((N // M, M), dst)):
        with T.Kernel(1, threads=64) as bx:
            S = T.alloc_shared((N,), src)
            T.copy(A, S)
            V = T.view(S, (N // M, M), dst)
            T.copy(V, B)
    return main


def view_bytes_as_words(N=256):
    @T.prim_func
    def main(A: T.Tensor((N,), "int8"), B: T.Tensor((N // 4,), "int32")):
        with T.Kernel(1, threads=64) as bx:
            W = T.view(A, shape=(N // 4,), dtype="int32")
            for i in T.Parallel(N // 4):
                B[i] = W[i] + 1
    return main


def store_through_view(N=64, M=8):
    # Writes through a reshape of the output: the parameter is written (not read-only).
    @T.prim_func
    def main(A: T.Tensor((N // M, M), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            B2 = T.reshape(B, (N // M, M))
            for i, j in T.Parallel(N // M, M):
                B2[i, j] = A[i, j] + 1.0
    return main


def test_global_reshape_in_a_copy(target):
    k = tilelang.compile(global_reshape(), target=target)
    a = RNG.standard_normal(512).astype("float32")
    b = np.zeros((16, 32), "float32")
    k(a, b)
    np.testing.assert_array_equal(b, a.reshape(16, 32))


def test_shared_reshape_between_copies(target):
    k = tilelang.compile(shared_reshape(), target=target)
    a = RNG.standard_normal(256).astype("float32")
    b = np.zeros((16, 16), "float32")
    k(a, b)
    np.testing.assert_allclose(b, a.reshape(16, 16) * 2 + np.arange(16, dtype="float32"), rtol=1e-6)


def test_store_through_a_reshaped_output(target):
    k = tilelang.compile(store_through_view(), target=target)
    a = RNG.standard_normal((8, 8)).astype("float32")
    b = np.zeros(64, "float32")
    k(a, b)
    np.testing.assert_array_equal(b, (a + 1).reshape(64))


@pytest.mark.parametrize("dst", ["int32", "uint32"])
def test_view_float32_bits(target, dst):
    k = tilelang.compile(view_words(dst=dst), target=target)
    a = RNG.standard_normal(256).astype("float32")
    b = np.zeros((8, 32), dst)
    k(a, b)
    np.testing.assert_array_equal(b, a.view(dst).reshape(8, 32))


@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_view_float16_pairs_as_words_cpu(dtype):
    k = tilelang.compile(view_halves_as_words(dtype=dtype), target="cpu")
    a = RNG.standard_normal(128).astype("float16")
    b = np.zeros(64, dtype)
    k(a, b)
    np.testing.assert_array_equal(b.view(np.uint32), a.view(np.uint32))


def test_view_int8_as_int32_cpu():
    k = tilelang.compile(view_bytes_as_words(), target="cpu")
    a = RNG.integers(-128, 128, 256).astype("int8")
    b = np.zeros(64, "int32")
    k(a, b)
    np.testing.assert_array_equal(b, a.view(np.int32) + 1)


def test_webgpu_refuses_a_view_between_widths():
    # The WGSL code generator refuses it: no adapter (nor the wgpu package) is needed to see.
    with pytest.raises(TileLangUnsupportedError) as ei:
        _C.codegen_wgsl(_C.lower(view_halves_as_words().handle, "webgpu"), "webgpu", True)
    msg = str(ei.value)
    assert "T.view 'W'" in msg and "float16" in msg and "int32" in msg


def test_printed_ir_shows_the_view_and_keys_differ():
    text = view_words().script()
    assert 'T.view(S, (8, 32), "int32")' in text
    assert view_words(dst="int32").script() != view_words(dst="uint32").script()


def test_written_params_include_writes_through_a_reshape():
    assert store_through_view().handle.written_params() == [1]


# ---------------------------------------------------------------- CUDA, without a GPU

CUDA_CASES = {
    "global_reshape": global_reshape,
    "shared_reshape": shared_reshape,
    "view_words": view_words,
    "view_halves": view_halves_as_words,
    "store_through_view": store_through_view,
}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("case", sorted(CUDA_CASES))
def test_cuda_source_compiles(case, arch):
    target = f"cuda -arch={arch}"
    lowered = _C.lower(CUDA_CASES[case]().handle, target)
    source = _C.codegen(lowered, target)
    if case in ("view_words", "view_halves"):
        assert "((int*)" in source or "((int32_t*)" in source, source
    reason = nvrtc_reason()
    if reason:
        pytest.skip(reason)
    cubin = _C.nvrtc_compile(source, f"{case}.cu", arch, [_include_dir()])
    assert cubin[:4] == b"\x7fELF"


def test_cuda_shared_reshape_waits_for_the_writers():
    # The Parallel loop writes S2 and the copy reads it back through the other name: a
    # barrier between them (and one before the loop, after the copy into S).
    source = _C.codegen(_C.lower(shared_reshape().handle, "cuda -arch=sm_80"), "cuda -arch=sm_80")
    assert source.count("__syncthreads()") >= 2, source


def test_cuda_tma_not_taken_for_a_view():
    def kernel():
        @T.prim_func
        def main(A: T.Tensor((64 * 64,), "float16"), B: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, threads=128) as bx:
                S = T.alloc_shared((64, 64), "float16")
                A2 = T.reshape(A, (64, 64))
                T.copy(A2, S)
                T.copy(S, B)
        return main
    lowered = _C.lower(kernel().handle, "cuda -arch=sm_90a")
    source = _C.codegen(lowered, "cuda -arch=sm_90a")
    # The store of S may be a TMA store (B is a parameter); the load from the view is not.
    assert "A_tmap" not in source and "tma_load" not in source, source


def test_cuda_gemm_on_an_aliased_tile_is_refused():
    def kernel():
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"),
                 C: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                As = T.alloc_shared((64, 64), "float16")
                Bs = T.alloc_shared((64, 64), "float16")
                Cf = T.alloc_fragment((64, 64), "float32")
                T.copy(A, As)
                Af = T.reshape(As, (64 * 64,))
                Af[0] = T.float16(0)
                T.copy(B, Bs)
                T.clear(Cf)
                T.gemm(As, Bs, Cf)
                T.copy(Cf, C)
        return main
    for arch in ("sm_80", "sm_90a"):
        with pytest.raises(TileLangUnsupportedError) as ei:
            _C.lower(kernel().handle, f"cuda -arch={arch}")
        assert "'As'" in str(ei.value) and "T.reshape / T.view" in str(ei.value)


# ---------------------------------------------------------------- errors at the call

THIS_FILE = os.path.basename(__file__)


def _line_of(fn, marker):
    src, start = inspect.getsourcelines(fn)
    return start + next(i for i, t in enumerate(src) if marker in t)


def _check(ei, fn, marker, *pieces):
    msg = str(ei.value)
    assert msg.startswith(f"{THIS_FILE}:{_line_of(fn, marker)}:") or \
        f"{THIS_FILE}:{_line_of(fn, marker)}:" in msg, msg
    for p in pieces:
        assert p in msg, (p, msg)


def test_element_count_mismatch():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), "float32"), B: T.Tensor((8, 8), "float32")):
            with T.Kernel(1, threads=32) as bx:
                A2 = T.reshape(A, (8, 9))  # <<count>>
                T.copy(A2[0:8, 0:8], B)
    with pytest.raises(TileLangShapeError) as ei:
        build()
    _check(ei, build, "<<count>>", "T.reshape of 'A'", "(64,)", "(8, 9)")


def test_bits_mismatch():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), "float16"), B: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=32) as bx:
                W = T.view(A, dtype="int32")  # <<bits>>
                for i in T.Parallel(64):
                    B[i] = W[i]
    with pytest.raises(TileLangShapeError) as ei:
        build()
    _check(ei, build, "<<bits>>", "T.view of 'A'", "float16", "int32", "bits")


def test_non_buffer_argument():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                A2 = T.reshape(A[0], (1,))  # <<arg>>
                B[0] = A2[0]
    with pytest.raises(TileLangTypeError) as ei:
        build()
    _check(ei, build, "<<arg>>", "T.reshape", "must be a buffer")


def test_fragment_is_refused():
    def build():
        @T.prim_func
        def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                F = T.alloc_fragment((64,), "float32")
                T.copy(A, F)
                F2 = T.reshape(F, (8, 8))  # <<frag>>
                T.copy(F2, B)
    with pytest.raises(TileLangUnsupportedError) as ei:
        build()
    _check(ei, build, "<<frag>>", "fragment 'F'", "T.alloc_shared")


def test_view_defaults_keep_shape_and_dtype():
    @T.prim_func
    def main(A: T.Tensor((4, 16), "float32"), B: T.Tensor((4, 16), "float32")):
        with T.Kernel(1, threads=32) as bx:
            V = T.view(A)
            T.copy(V, B)
    k = tilelang.compile(main, target="cpu")
    a = RNG.standard_normal((4, 16)).astype("float32")
    b = np.zeros_like(a)
    k(a, b)
    np.testing.assert_array_equal(a, b)


def conv1d_img2col(N=4, L=64, KL=16, F=32, BN=2, BL=32, dtype="float32"):
    # The tilelang-puzzles conv solution's shape: the patches gathered into a 3-D shared
    # tile, multiplied as its (BN * BL, KL) reshape, the (BN * BL, F) accumulator stored as
    # its (BN, BL, F) reshape.
    @T.prim_func
    def main(X: T.Tensor((N, L), dtype), K: T.Tensor((KL, F), dtype), O: T.Tensor((N, L, F), dtype)):
        with T.Kernel(N // BN, L // BL, threads=128) as (pid_n, pid_l):
            X_shared = T.alloc_shared((BN, BL, KL), dtype)
            K_shared = T.alloc_shared((KL, F), dtype)
            O_local = T.alloc_fragment((BN * BL, F), "float32")
            for i, j, k in T.Parallel(BN, BL, KL):
                if pid_l * BL + j + k < L:
                    X_shared[i, j, k] = X[pid_n * BN + i, pid_l * BL + j + k]
                else:
                    X_shared[i, j, k] = 0
            X_rows = T.reshape(X_shared, (BN * BL, KL))
            T.copy(K, K_shared)
            T.gemm(X_rows, K_shared, O_local, clear_accum=True)
            O_3d = T.reshape(O_local, (BN, BL, F))
            T.copy(O_3d, O[pid_n * BN, pid_l * BL, 0])
    return main


def test_reshaped_tile_and_fragment_around_a_gemm(target):
    dtype = "float16" if target.startswith("cuda") else "float32"
    x = RNG.standard_normal((4, 64)).astype(dtype)
    k = RNG.standard_normal((16, 32)).astype(dtype)
    o = np.zeros((4, 64, 32), dtype)
    tilelang.compile(conv1d_img2col(dtype=dtype), target=target)(x, k, o)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 15)))
    patches = np.stack([xp[:, j:j + 16] for j in range(64)], axis=1)  # (N, L, KL)
    np.testing.assert_allclose(o.astype(np.float64), patches @ k.astype(np.float64),
                               rtol=2e-2 if dtype == "float16" else 1e-5, atol=2e-2 if dtype == "float16" else 1e-5)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_gemm_on_a_reshaped_tile_is_swizzled_under_both_names(arch):
    """Rows kept in multiples of 8 and the columns unchanged: the in-place swizzle is the
    same permutation under both names, so the gemm operand is stored swizzled and the
    threads' 3-D writes go through it too."""
    reason = nvrtc_reason()
    if reason:
        pytest.skip(f"NVRTC is not available: {reason}")
    lowered = _C.lower(conv1d_img2col(dtype="float16").handle, f"cuda -arch={arch}")
    source = _C.codegen(lowered, f"cuda -arch={arch}")
    assert " ^ " in source  # the swizzle's XOR on the shared addresses
    assert _C.nvrtc_compile(source, "conv.cu", arch, [_include_dir()])[:4] == b"\x7fELF"


def test_fragment_reshape_that_regroups_registers_is_refused():
    def build():
        @T.prim_func
        def main(A: T.Tensor((8, 16), "float32"), B: T.Tensor((16, 8), "float32")):
            with T.Kernel(1, threads=32) as bx:
                F = T.alloc_fragment((8, 16), "float32")
                T.copy(A, F)
                F2 = T.reshape(F, (16, 8))  # <<regroup>>
                T.copy(F2, B)
    with pytest.raises(TileLangUnsupportedError) as ei:
        build()
    _check(ei, build, "<<regroup>>", "T.reshape of the fragment 'F' to (16, 8)", "last dimension kept")
