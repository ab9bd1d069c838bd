"""The eager style of @tilelang.jit: parameters typed in the body, shape symbols from
T.const bound from the call's tensors, outputs from T.empty returned by the call, and
fn.compile(**symbols); T.empty in a @T.prim_func."""
import numpy as np
import pytest

import tilelang
import tilelang.language as T
import tilelang.testing
from tilelang.errors import TileLangError, TileLangSyntaxError
from tilelang.jit import kernel as jit_kernel

rng = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    return tmp_path / "cache"


def rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


@tilelang.jit(target="cpu")
def vector_add(A, B, block: int = 64):
    N = T.const("N")
    A: T.Tensor((N,), T.float32)
    B: T.Tensor((N,), T.float32)
    C = T.empty((N,), T.float32)
    with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
        for i in T.Parallel(block):
            C[bx * block + i] = A[bx * block + i] + B[bx * block + i]
    return C


@tilelang.jit(target="cpu")
def matmul(A, B, block_M: int = 32, block_N: int = 32, block_K: int = 16, dtype=T.float32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor[[K, N], dtype]
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[by * block_M, bx * block_N])
    return C


def test_call_compiles_per_binding_and_returns_the_output():
    vector_add.kernels.clear()
    a, b = rand(1000), rand(1000)
    assert vector_add.mode == "eager"
    np.testing.assert_allclose(vector_add(a, b), a + b, rtol=1e-6)
    kernels = vector_add._eager.kernels
    assert len(kernels) == 1
    first = next(iter(kernels.values()))
    np.testing.assert_allclose(vector_add(b, a), a + b, rtol=1e-6)  # same binding: no new kernel
    assert len(kernels) == 1 and next(iter(kernels.values())) is first
    c = vector_add(a[:300].copy(), b[:300].copy())  # N = 300: a second kernel
    assert c.shape == (300,) and len(kernels) == 2
    np.testing.assert_allclose(c, a[:300] + b[:300], rtol=1e-6)
    np.testing.assert_allclose(vector_add(a, b, block=128), a + b, rtol=1e-6)  # a compile-time argument
    assert len(kernels) == 3
    # each kernel is specialised: its parameters have the binding's static shapes
    shapes = sorted(k.params[0].shape[0].value for k in kernels.values())
    assert shapes == [300, 1000, 1000]


def test_gemm_with_three_symbols_and_subscript_annotation():
    A, B = rand(100, 70), rand(70, 50)
    C = matmul(A, B)
    assert C.shape == (100, 50) and C.dtype == np.float32
    np.testing.assert_allclose(C, A @ B, rtol=1e-4, atol=1e-4)


def test_compile_with_symbols_by_name():
    k = matmul.compile(M=64, N=48, K=32, block_M=32, block_N=16)
    assert isinstance(k, tilelang.JITKernel)
    assert [p.name for p in k.params] == ["A", "B", "C"] and k.out_idx == [2]
    assert [[e.value for e in p.shape] for p in k.params] == [[64, 32], [32, 48], [64, 48]]
    A, B = rand(64, 32), rand(32, 48)
    np.testing.assert_allclose(k(A, B), A @ B, rtol=1e-4, atol=1e-4)
    # tensors bind the symbols too; a symbol given by name wins over a tensor's extent
    tir = matmul.get_tir(A, B)
    assert [e.value for e in tir.params[2].shape] == [64, 48]
    assert "M" not in [getattr(e, "name", None) for p in tir.params for e in p.shape]
    src = matmul.get_kernel_source(M=64, N=48, K=32)
    assert isinstance(src, str) and src


def test_symbols_separated_by_spaces_and_a_single_symbol():
    @tilelang.jit(target="cpu")
    def transpose(A):
        M, N = T.const("M N")
        A: T.Tensor((M, N), T.int32)
        B = T.empty((N, M), T.int32)
        with T.Kernel(1, threads=1) as _:
            for i, j in T.Parallel(M, N):
                B[j, i] = A[i, j]
        return B

    a = rng.integers(-100, 100, (5, 7)).astype(np.int32)
    np.testing.assert_array_equal(transpose(a), a.T)


def test_several_outputs_are_returned_in_the_order_written():
    @tilelang.jit(target="cpu")
    def sum_and_diff(A, B):
        N = T.const("N")
        A: T.Tensor((N,), T.float32)
        B: T.Tensor((N,), T.float32)
        S = T.empty((N,), T.float32)
        D = T.empty((N,), T.float32)
        with T.Kernel(1, threads=1) as _:
            for i in T.Parallel(N):
                S[i] = A[i] + B[i]
                D[i] = A[i] - B[i]
        return D, S

    a, b = rand(33), rand(33)
    d, s = sum_and_diff(a, b)
    np.testing.assert_allclose(d, a - b, rtol=1e-6)
    np.testing.assert_allclose(s, a + b, rtol=1e-6)


def test_scalar_parameter_and_in_place_kernel_without_outputs():
    @tilelang.jit(target="cpu")
    def axpy(X, Y, alpha):
        N = T.const("N")
        X: T.Tensor((N,), T.float32)
        Y: T.Tensor((N,), T.float32)
        alpha: T.float32
        with T.Kernel(1, threads=1) as _:
            for i in T.Parallel(N):
                Y[i] = Y[i] + alpha * X[i]

    x, y = rand(40), rand(40)
    expected = y + np.float32(2.5) * x
    assert axpy(x, y, 2.5) is None
    np.testing.assert_allclose(y, expected, rtol=1e-6)
    assert [p.kind for p in next(iter(axpy._eager.kernels.values())).params] == ["buffer", "buffer", "scalar"]


def test_parse_time_checks_see_the_symbols_values():
    @tilelang.jit(target="cpu")
    def tiled_copy(A, block: int = 16):
        N = T.const("N")
        assert N % block == 0, "N must be a multiple of the block"
        A: T.Tensor((N,), T.float32)
        B = T.empty((N,), T.float32)
        with T.Kernel(N // block, threads=block) as bx:
            T.copy(A[bx * block:(bx + 1) * block], B[bx * block:(bx + 1) * block])
        return B

    a = rand(64)
    np.testing.assert_array_equal(tiled_copy(a), a)
    with pytest.raises(TileLangError, match="N must be a multiple of the block"):
        tiled_copy(rand(40))


def test_dynamic_dimension_stays_symbolic():
    @tilelang.jit(target="cpu")
    def scale(A):
        N = T.dynamic("N")
        A: T.Tensor((N,), T.float32)
        B = T.empty((N,), T.float32)
        with T.Kernel(T.ceildiv(N, 32), threads=32) as bx:
            for i in T.Parallel(32):
                B[bx * 32 + i] = A[bx * 32 + i] * 2.0
        return B

    for n in (10, 100):
        a = rand(n)
        np.testing.assert_allclose(scale(a), a * 2, rtol=1e-6)
    assert len(scale._eager.kernels) == 1


def test_kernel_found_in_the_disk_cache_by_a_new_jit_object():
    def make():
        @tilelang.jit(target="cpu")
        def negate(A):
            N = T.const("N")
            A: T.Tensor((N,), T.float32)
            B = T.empty((N,), T.float32)
            with T.Kernel(1, threads=1) as _:
                for i in T.Parallel(N):
                    B[i] = -A[i]
            return B
        return negate

    a = rand(17)
    first = make()
    np.testing.assert_array_equal(first(a), -a)
    assert next(iter(first._eager.kernels.values())).cache_hit is None  # compiled
    jit_kernel._memory_cache.clear()
    second = make()
    np.testing.assert_array_equal(second(a), -a)
    assert next(iter(second._eager.kernels.values())).cache_hit == "disk"


def test_lazy_style_unchanged():
    @tilelang.jit(out_idx=[-1], target="cpu")
    def lazy(n):
        @T.prim_func
        def double(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=1) as _:
                for i in T.Parallel(n):
                    B[i] = A[i] * 2.0
        return double

    assert lazy.mode == "lazy"
    k = lazy(16)
    assert isinstance(k, tilelang.JITKernel)
    a = rand(16)
    np.testing.assert_allclose(k(a), a * 2, rtol=1e-6)


def test_prim_func_returning_empty_outputs():
    @T.prim_func
    def halve(A: T.Tensor((8,), "float32")):
        B = T.empty((8,), "float32")
        with T.Kernel(1, threads=1) as _:
            for i in T.Parallel(8):
                B[i] = A[i] * 0.5
        return B

    assert halve.out_idx == [1]
    k = tilelang.compile(halve, target="cpu")
    a = rand(8)
    np.testing.assert_allclose(k(a), a * 0.5, rtol=1e-6)
    with pytest.raises(ValueError, match="Out index conflict"):
        tilelang.compile(halve, out_idx=[-1], target="cpu")


# ---------------------------------------------------------------- misuse
def test_out_idx_is_rejected_in_eager_mode():
    with pytest.raises(ValueError, match="out_idx is only supported in lazy mode"):
        @tilelang.jit(out_idx=[-1], target="cpu")
        def f(A):
            N = T.const("N")
            A: T.Tensor((N,), T.float32)
            with T.Kernel(1) as _:
                T.clear(A)


def test_missing_and_bad_symbol_values():
    with pytest.raises(ValueError, match="Cannot find value for constexpr variable `M`"):
        matmul.compile(N=4, K=4)
    with pytest.raises(TypeError, match="unexpected keyword argument 'Q'.*M, N, K"):
        matmul.compile(M=4, N=4, K=4, Q=1)
    with pytest.raises(TypeError, match="shape symbol 'M' must be an int, got 4.0"):
        matmul.compile(M=4.0, N=4, K=4)
    with pytest.raises(TypeError, match=r"missing the runtime argument\(s\) 'B'"):
        matmul(rand(4, 4))


def test_symbol_only_used_indirectly_must_be_given_by_name():
    @tilelang.jit(target="cpu")
    def pad(A):
        N = T.const("N")
        A: T.Tensor((N * 2,), T.float32)
        B = T.empty((N * 2,), T.float32)
        with T.Kernel(1, threads=1) as _:
            T.copy(A, B)
        return B

    with pytest.raises(ValueError, match="shape symbol 'N' is not the extent of any input tensor's dimension"):
        pad(rand(8))
    a = rand(8)
    np.testing.assert_array_equal(pad(a, N=4), a)


def test_mismatched_tensors_are_rejected_by_the_call_checks():
    with pytest.raises(ValueError, match="argument 'B' has shape \\(20,\\), expected \\(30,\\)"):
        vector_add(rand(30), rand(20))
    with pytest.raises(TypeError, match="argument 'A' has dtype float64, expected float32"):
        vector_add(rand(30, dtype=np.float64), rand(30))


def test_outputs_must_be_returned_and_only_outputs():
    @tilelang.jit(target="cpu")
    def forgets(A):
        N = T.const("N")
        A: T.Tensor((N,), T.float32)
        B = T.empty((N,), T.float32)
        with T.Kernel(1, threads=1) as _:
            T.copy(A, B)

    with pytest.raises(TileLangSyntaxError, match="T.empty tensor\\(s\\) 'B' are not returned"):
        forgets(rand(4))

    @tilelang.jit(target="cpu")
    def returns_input(A):
        N = T.const("N")
        A: T.Tensor((N,), T.float32)
        with T.Kernel(1, threads=1) as _:
            T.clear(A)
        return A

    with pytest.raises(TileLangSyntaxError, match="returns buffer 'A'; only tensors made by T.empty"):
        returns_input(rand(4))


def test_declaration_errors():
    @tilelang.jit(target="cpu")
    def early(A):
        N = T.const("N")
        x = A[0]  # noqa: F841
        A: T.Tensor((N,), T.float32)
        with T.Kernel(1) as _:
            T.clear(A)

    with pytest.raises(TileLangSyntaxError, match="parameter 'A' is used before its type is declared"):
        early(rand(4))

    @tilelang.jit(target="cpu")
    def empty_in_kernel(A):
        N = T.const("N")
        A: T.Tensor((N,), T.float32)
        with T.Kernel(1) as _:
            B = T.empty((N,), T.float32)
            T.copy(A, B)
        return B

    with pytest.raises(TileLangSyntaxError, match="T.empty is used inside a kernel body"):
        empty_in_kernel(rand(4))

    with pytest.raises(TileLangSyntaxError, match="used outside one"):
        @T.prim_func
        def not_eager(A: T.Tensor((4,), "float32")):
            N = T.const("N")  # noqa: F841
            with T.Kernel(1) as _:
                T.clear(A)

    with pytest.raises(TypeError, match="T.const: '1x' is not a valid name"):
        @tilelang.jit(target="cpu")
        def bad_name(A):
            M = T.const("1x")
            A: T.Tensor((M,), T.float32)
            with T.Kernel(1) as _:
                T.clear(A)
        bad_name(rand(4))


def test_numeric_const_unchanged():
    assert T.const(3, "int32").value == 3
    assert T.const(1.5, "float32").dtype == "float32"


@tilelang.testing.requires_cuda
def test_eager_gemm_on_the_gpu_with_torch_tensors():
    torch = pytest.importorskip("torch")

    @tilelang.jit(target="cuda")
    def mm(A, B, block_M: int = 64, block_N: int = 64, block_K: int = 32):
        M, N, K = T.const("M, N, K")
        A: T.Tensor((M, K), T.float16)
        B: T.Tensor((K, N), T.float16)
        C = T.empty((M, N), T.float16)
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_K, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])
        return C

    for m, n, k in ((256, 128, 96), (100, 70, 64)):
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        c = mm(a, b)
        assert c.device.type == "cuda" and c.shape == (m, n)
        torch.testing.assert_close(c, a @ b, rtol=1e-2, atol=1e-2)
    assert len(mm._eager.kernels) == 2
