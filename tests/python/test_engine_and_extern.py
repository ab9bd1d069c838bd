"""tilelang.engine (lower, KernelParam, the CUDA post-processing callback),
tilelang.language.fp8, T.Layout / T.Fragment, T.thread_binding, T.CUDASourceCodeKernel,
external functions in a DSL kernel (T.import_source, T.call_extern, T.access_ptr,
T.reinterpret, T.evaluate), T.alloc_global workspaces, and what T.reshape / T.view refuse
with a reason (fragments; the rest is tests/python/test_reshape_view.py)."""
import numpy as np
import pytest

import tilelang
import tilelang.language as T
import tilelang.testing
from tilelang import _C
from tilelang.engine import callback
from tilelang.errors import TileLangError, TileLangSyntaxError, TileLangTypeError, TileLangUnsupportedError

CUDA = "cuda -arch=sm_90a"

COPY_SOURCE = """
extern "C" __global__ void external_copy(float* A, float* B, int n) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) {
        B[i] = A[i] * 2.0f;
    }
}
"""


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    yield tmp_path / "cache"
    callback.clear_cuda_postproc_callback()


def double_kernel(n=64):
    @T.prim_func
    def double(A: T.Tensor((n,), "float16"), B: T.Tensor((n,), "float16"), scale: T.float32):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(n):
                B[i] = A[i] * scale
    return double


def source_kernel(source=COPY_SOURCE, entry_name="external_copy"):
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
        T.CUDASourceCodeKernel(T.ceildiv(N, 128), threads=128, source_code_or_path=source, entry_name=entry_name)

    return main


# ---------------------------------------------------------------- tilelang.engine
def test_engine_lower_cpu_and_cuda():
    art = tilelang.engine.lower(double_kernel(), target="cpu")
    assert isinstance(art, tilelang.engine.CompiledArtifact)
    assert [p.name for p in art.params] == ["A", "B", "scale"]
    assert "double_entry" in art.kernel_source and art.host_mod is None and art.rt_mod is None
    assert "double" in art.device_mod.script()
    cuda = tilelang.engine.lower(double_kernel(), target=CUDA)  # no GPU needed
    assert "__global__" in cuda.kernel_source and "threadIdx.x" in cuda.kernel_source
    from tilelang.engine.lower import lower
    assert lower is tilelang.engine.lower
    with pytest.raises(TileLangUnsupportedError, match="builds no host or device module"):
        tilelang.engine.lower(double_kernel(), target="cpu", enable_device_compile=True)
    with pytest.raises(TypeError, match="expects a @T.prim_func, got int"):
        tilelang.engine.lower(3)


def test_kernel_param():
    from tilelang.engine.param import KernelParam
    k = tilelang.compile(double_kernel(16), out_idx=[1], target="cpu")
    a, b, s = k.params
    assert isinstance(a, KernelParam)
    assert a.dtype == "float16" and [e.value for e in a.shape] == [16]
    assert not a.is_scalar() and s.is_scalar() and s.dtype == "float32"
    assert not a.is_unsigned() and not a.is_float8() and not a.is_boolean()
    x = np.arange(16).astype(np.float16)
    np.testing.assert_array_equal(k(x, 0.5), x * np.float16(0.5))


def test_cuda_postproc_callback_changes_the_source_and_the_cache_key():
    from tilelang.jit.backends import CudaBackend
    try:
        plain_id = CudaBackend().compiler_id()
    except Exception as e:  # NVRTC missing
        pytest.skip(f"NVRTC is not available: {e}")

    @tilelang.engine.register_cuda_postproc_callback
    def mark(code, target):
        return "// post-processed for " + target + "\n" + code

    src = tilelang.engine.lower(double_kernel(), target=CUDA).kernel_source
    assert src.startswith(f"// post-processed for {CUDA}\n") and "__global__" in src
    assert CudaBackend().compiler_id() != plain_id

    def other(code, target):
        return code

    callback.register_cuda_postproc_callback(other, override=False)  # keeps `mark`
    assert tilelang.engine.lower(double_kernel(), target=CUDA).kernel_source.startswith("// post-processed")
    callback.register_cuda_postproc_callback(lambda code, target: None)
    with pytest.raises(TypeError, match="returned NoneType, not the source code"):
        tilelang.engine.lower(double_kernel(), target=CUDA)
    with pytest.raises(TypeError, match="expected a function"):
        callback.register_cuda_postproc_callback(42)
    callback.clear_cuda_postproc_callback()
    assert CudaBackend().compiler_id() == plain_id


# ---------------------------------------------------------------- dtypes
def test_fp8_dtypes_and_data_type():
    from tilelang.language.fp8 import determine_fp8_type
    assert determine_fp8_type() == T.float8_e4m3fn == "float8_e4m3"
    assert determine_fp8_type("e5m2") == T.float8_e5m2
    assert isinstance(determine_fp8_type(), tilelang.DataType)
    with pytest.raises(ValueError, match="Unsupported FP8 format: e3m4"):
        determine_fp8_type("e3m4")
    assert tilelang.DataType("float16") == T.float16 and tilelang.DataType(float) == "float32"


def test_fp8_torch_dtype():
    torch = pytest.importorskip("torch")
    from tilelang.language.fp8 import determine_torch_fp8_type
    assert determine_torch_fp8_type("e4m3") is torch.float8_e4m3fn
    assert determine_torch_fp8_type("e5m2") is torch.float8_e5m2


# ---------------------------------------------------------------- layouts
def test_layout_and_fragment_objects():
    lay = T.Layout((8, 8), lambda i, j: i * 8 + (j ^ i))
    assert list(lay.get_input_shape()) == [8, 8]
    assert [lay.map_forward_index([i, j])[0] for i, j in [(0, 0), (1, 0), (3, 5)]] == [0, 9, 30]
    frag = T.Fragment((16,), forward_thread_fn=lambda i: i % 4, forward_index_fn=lambda i: i // 4)
    assert [frag.map_forward_thread([i]) for i in (0, 5, 15)] == [[0], [1], [3]]
    assert frag.map_forward_index([13]) == [3]
    assert tilelang.layout.Layout is T.Layout and tilelang.layout.Fragment is T.Fragment
    with pytest.raises(TypeError, match=r"forward_fn\(0,\) must give \(thread, index\)"):
        T.Fragment((16,), forward_fn=lambda i: i)
    with pytest.raises(TypeError, match="Fragment needs forward_fn, or forward_thread_fn"):
        T.Fragment((16,))
    with pytest.raises(TypeError, match="forward_fn must be callable"):
        T.Layout((4,), 3)


def test_user_fragment_in_annotate_layout_is_taken():
    # More in test_user_fragments.py: a T.Fragment by hand is the fragment's thread mapping.
    from tilelang.tools import kernel_layouts

    @T.prim_func
    def f(A: T.Tensor((8, 8), "float32"), B: T.Tensor((8, 8), "float32")):
        with T.Kernel(1, threads=32) as _:
            F = T.alloc_fragment((8, 8), "float32")
            T.annotate_layout({F: T.Fragment((8, 8), forward_thread_fn=lambda i, j: i, forward_index_fn=lambda i, j: j)})
            T.copy(A, F)
            T.copy(F, B)

    used = kernel_layouts(f, "cuda -arch=sm_80")["F"]
    assert used.threads_of()[0].tolist() == [[i] * 8 for i in range(8)]
    assert used.slots_of().tolist() == [list(range(8))] * 8


# ---------------------------------------------------------------- T.thread_binding
def test_thread_binding(target):
    def build():
        @T.prim_func
        def rev(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as _:
                for tx in T.thread_binding(64, thread="threadIdx.x"):
                    B[63 - tx] = A[tx] + 1.0
        return rev

    if target == "cpu":
        with pytest.raises(TileLangUnsupportedError, match="cpu"):
            tilelang.compile(build(), target="cpu")
        return
    k = tilelang.compile(build(), out_idx=[-1], target=target)
    a = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    np.testing.assert_allclose(np.asarray(k(a)), (a + 1)[::-1], rtol=1e-6)


def test_thread_binding_misuse():
    assert "threadIdx.y" in tilelang.engine.lower(_thread_y_kernel(), target=CUDA).kernel_source
    with pytest.raises(TileLangUnsupportedError, match=r"over \[0, 0 \+ 32\) on threadIdx.x, but the kernel has 64"):
        @T.prim_func
        def partial(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as _:
                for tx in T.thread_binding(32, thread="threadIdx.x"):
                    A[tx] = 0.0
    with pytest.raises(TileLangSyntaxError, match="outside a T.Kernel block"):
        @T.prim_func
        def outside(A: T.Tensor((64,), "float32")):
            for tx in T.thread_binding(64, thread="threadIdx.x"):
                A[tx] = 0.0
    with pytest.raises(TypeError, match="thread must be 'threadIdx.x'"):
        T.thread_binding(64, thread="blockIdx.x")


def _thread_y_kernel():
    @T.prim_func
    def grid2(A: T.Tensor((4, 32), "float32")):
        with T.Kernel(1, threads=[32, 4]) as _:
            for ty in T.thread_binding(0, 4, thread="threadIdx.y"):
                for tx in T.thread_binding(32, "threadIdx.x"):
                    A[ty, tx] = 1.0
    return grid2


# ---------------------------------------------------------------- T.reshape / T.view refusals
@pytest.mark.parametrize("name, call", [
    ("reshape", lambda F: T.reshape(F, (4, 4))),
    ("view", lambda F: T.view(F, (4, 4))),
])
def test_views_of_fragments_are_typed_errors(name, call):
    with pytest.raises(TileLangUnsupportedError, match=f"T.{name} of the fragment 'F' to \\(4, 4\\) is not supported") as ei:
        @T.prim_func
        def f(A: T.Tensor((16,), "float32")):
            with T.Kernel(1) as _:
                F = T.alloc_fragment((16,), "float32")
                call(F)
    assert ei.value.file == __file__ and ei.value.hint


# ---------------------------------------------------------------- T.alloc_global
def two_pass_sum(N, blocks=4):
    """P[b] = the sum of 2 A over block b's slice, through a workspace (T.alloc_global): the
    block writes its doubled slice into W[b] and sums it back. The call allocates W and
    never returns it."""

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), P: T.Tensor((blocks,), "float32")):
        W = T.alloc_global((blocks, N // blocks), "float32")
        with T.Kernel(blocks, threads=32) as b:
            for i in T.serial(N // blocks):
                W[b, i] = A[b * (N // blocks) + i] * 2.0
            P[b] = 0.0
            for i in T.serial(N // blocks):
                P[b] = P[b] + W[b, i]

    return main


def test_alloc_global_is_a_workspace_the_call_allocates(target):
    func = two_pass_sum(64)
    assert func.workspace_idx == [2] and [p.name for p in func.params] == ["A", "P", "W"]
    kernel = tilelang.compile(func, out_idx=[-1], target=target)  # -1 is P: the workspace is not counted
    assert [p.name for p in kernel.input_params] == ["A"] and kernel.workspace_idx == [2]
    a = np.arange(64, dtype=np.float32)
    p = np.asarray(kernel(a))
    np.testing.assert_allclose(p, 2 * a.reshape(4, 16).sum(axis=1))
    p2 = np.asarray(kernel(a))  # the fast path of a repeated call allocates it too
    np.testing.assert_allclose(p2, p)
    out = np.zeros(4, np.float32)
    kernel(a, out)  # outputs given: the workspace is still not an argument
    np.testing.assert_allclose(out, p)
    with pytest.raises(TypeError, match=r"takes 1 argument\(s\) \(A\), got 3"):
        kernel(a, out, np.zeros((4, 16), np.float32))


def test_alloc_global_inside_the_kernel_is_an_error():
    with pytest.raises(TileLangSyntaxError, match="T.alloc_global is used inside a kernel body"):
        @T.prim_func
        def f(A: T.Tensor((16,), "float32")):
            with T.Kernel(1) as _:
                W = T.alloc_global((16,), "float32")  # noqa: F841


# ---------------------------------------------------------------- external functions in a DSL kernel
HELPERS_CPP = """
static inline float twice(float x) { return 2.0f * x; }
static inline void fill3(float* p, float v) { p[0] = v; p[1] = v; p[2] = v; }
"""
HELPERS_CUDA = """
__device__ __forceinline__ float twice(float x) { return 2.0f * x; }
__device__ __forceinline__ void fill3(float* p, float v) { p[0] = v; p[1] = v; p[2] = v; }
"""


def extern_kernel(helpers, by_prelude=False, order="value_first", region=False):
    """B = twice(A) by an imported function, B[8:11] = 7 through a pointer (T.access_ptr,
    of an element or of a region, 4 elements further with offset=), C = A's bits as int32."""

    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"), C: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64, prelude=helpers if by_prelude else None) as _:
            if not by_prelude:
                T.import_source(helpers)
            for i in T.Parallel(64):
                B[i] = T.call_extern("float32", "twice", A[i])
                C[i] = T.reinterpret(A[i], "int32") if order == "value_first" else T.reinterpret("int32", A[i])
            if region:
                T.evaluate(T.call_extern("handle", "fill3", T.access_ptr(B[4:16], "w", offset=4), 7.0))
            else:
                T.call_extern("handle", "fill3", T.access_ptr(B[8], "rw"), 7.0)

    return main


@pytest.mark.parametrize("by_prelude, order, region", [(False, "value_first", False), (True, "dtype_first", True)])
def test_call_extern_on_cpu(by_prelude, order, region):
    kernel = tilelang.compile(extern_kernel(HELPERS_CPP, by_prelude, order, region), target="cpu")
    rng = np.random.default_rng(0)
    a = rng.standard_normal(64).astype(np.float32)
    b = np.zeros(64, np.float32)
    c = np.zeros(64, np.int32)
    kernel(a, b, c)
    expected = 2 * a
    expected[8:11] = 7.0
    np.testing.assert_array_equal(b, expected)
    np.testing.assert_array_equal(c, a.view(np.int32))
    assert "static inline float twice" in kernel.get_kernel_source()


def test_call_extern_with_dtype_by_keyword():
    """T.call_extern(func_name, *args, dtype=...) as upstream's dequantize examples write it;
    a call without a function name is a typed error."""
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _:
            T.import_source(HELPERS_CPP)
            for i in T.Parallel(64):
                B[i] = T.call_extern("twice", A[i], dtype="float32")
            T.call_extern("fill3", T.address_of(B[8]), 7.0, dtype="handle")

    kernel = tilelang.compile(main, target="cpu")
    a = np.random.default_rng(1).standard_normal(64).astype(np.float32)
    b = np.zeros(64, np.float32)
    kernel(a, b)
    expected = 2 * a
    expected[8:11] = 7.0
    np.testing.assert_array_equal(b, expected)
    from tilelang.errors import TileLangTypeError
    with pytest.raises(TileLangTypeError, match="the function name is missing"):
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as _:
                T.call_extern(dtype="handle")


def test_block_bindings():
    """T.get_block_binding(d) / T.get_block_bindings(): the block indices T.Kernel binds."""
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float32")):
        with T.Kernel(8, 4, threads=32) as (bx, by):
            x, y = T.get_block_binding(0), T.get_block_binding(1)
            xs = T.get_block_bindings()
            A[y, x] = T.cast(xs[1] * 100 + xs[0], "float32")

    kernel = tilelang.compile(main, target="cpu")
    a = np.zeros((4, 8), np.float32)
    kernel(a)
    np.testing.assert_array_equal(a, np.arange(4)[:, None] * 100 + np.arange(8)[None, :])
    from tilelang.errors import TileLangTypeError
    with pytest.raises(TileLangTypeError, match=r"T.get_block_binding\(2\): the kernel has 2 grid dimension"):
        @T.prim_func
        def bad(A: T.Tensor((4, 8), "float32")):
            with T.Kernel(8, 4, threads=32) as (bx, by):
                A[0, 0] = T.cast(T.get_block_binding(2), "float32")


def test_call_extern_for_cuda():
    """The same kernel for CUDA: the imported device functions come before the kernel, the
    calls and the bit cast are in it, and NVRTC compiles it."""
    from sass import sass_of
    func = extern_kernel(HELPERS_CUDA)
    source = _C.codegen(_C.lower(func.handle, CUDA), CUDA)
    assert source.index("__device__ __forceinline__ float twice") < source.index("__global__")
    assert "= twice(A[" in source and "fill3((&B[8]), 7.0f);" in source
    assert "tl::bit_cast<int32_t>(A[" in source
    sass, _, _ = sass_of(func)
    assert "STG" in sass


def test_import_source_changes_the_cache_key():
    a = extern_kernel(HELPERS_CPP).script()
    b = extern_kernel(HELPERS_CPP.replace("2.0f", "3.0f")).script()
    assert a != b


def test_reinterpret_needs_the_same_width():
    @T.prim_func
    def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "int16")):
        with T.Kernel(1) as _:
            for i in T.Parallel(4):
                B[i] = T.reinterpret(A[i], "int16")

    with pytest.raises(TileLangTypeError, match="T.reinterpret: float32 and int16 are not of the same width"):
        tilelang.compile(main, target="cpu")


@pytest.mark.parametrize("call, message", [
    (lambda A: T.access_ptr(A[0], "x"), "access_type must be 'r', 'w', 'rw'"),
    (lambda A: T.call_extern("float32", "not a name", A[0]), "the function name must be an identifier"),
    (lambda A: T.reinterpret(A[0]), "T.reinterpret takes a value and a dtype, got 1 arguments"),
    (lambda A: T.import_source(42), "T.import_source takes source text, got int"),
])
def test_extern_misuse(call, message):
    with pytest.raises(TileLangTypeError, match=message):
        @T.prim_func
        def f(A: T.Tensor((16,), "float32")):
            with T.Kernel(1) as _:
                call(A)


# ---------------------------------------------------------------- T.CUDASourceCodeKernel
def test_source_kernel_recorded_and_lowered():
    func = source_kernel()
    spec = func.source_kernel
    assert spec.entry_name == "external_copy" and spec.block == [128, 1, 1] and len(spec.grid) == 3
    assert [p.name for p in func.params] == ["A", "B"]
    art = tilelang.engine.lower(func, target=CUDA)
    assert art.kernel_source == COPY_SOURCE
    with pytest.raises(TileLangUnsupportedError, match="needs the cuda target, not 'cpu'"):
        tilelang.compile(func, target="cpu")


def test_source_kernel_from_a_file_and_prelude(tmp_path):
    path = tmp_path / "copy.cu"
    path.write_text(COPY_SOURCE)
    func = source_kernel(str(path))
    assert func.source_kernel.source == COPY_SOURCE
    with pytest.raises(TileLangError, match="FileNotFoundError: CUDA source file not found"):
        source_kernel(str(tmp_path / "missing.cu"))

    @T.prim_func
    def with_prelude(A: T.Tensor((4,), T.float32)):
        T.CUDASourceCodeKernel(1, source_code_or_path='extern "C" __global__ void k(float* a) { a[0] = ONE; }',
                               entry_name="k", prelude="#define ONE 1.0f")
    assert with_prelude.source_kernel.source.startswith("#define ONE 1.0f\n")
    assert with_prelude.source_kernel.block == [128, 1, 1]  # threads default


def test_source_kernel_misuse():
    with pytest.raises(TileLangTypeError, match="Available entries: external_copy"):
        source_kernel(entry_name="main_kernel")
    with pytest.raises(TileLangTypeError, match="at least one __global__ kernel"):
        source_kernel(source="__device__ int f() { return 1; }\n", entry_name="f")
    with pytest.raises(TileLangSyntaxError, match="has other statements"):
        @T.prim_func
        def mixed(A: T.Tensor((4,), T.float32)):
            T.CUDASourceCodeKernel(1, threads=4, source_code_or_path=COPY_SOURCE, entry_name="external_copy")
            with T.Kernel(1) as _:
                T.clear(A)
    with pytest.raises(TileLangSyntaxError, match="inside a kernel body"):
        @T.prim_func
        def nested(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1) as _:
                T.CUDASourceCodeKernel(1, threads=4, source_code_or_path=COPY_SOURCE, entry_name="external_copy")
    with pytest.raises(TileLangUnsupportedError, match="cluster_dims is not supported yet"):
        @T.prim_func
        def cluster(A: T.Tensor((4,), T.float32)):
            T.CUDASourceCodeKernel(1, threads=4, source_code_or_path=COPY_SOURCE, entry_name="external_copy",
                                   cluster_dims=2)


def test_source_kernel_compiles_with_nvrtc():
    from tilelang.jit.kernel import _include_dir
    from tilelang.jit.source_kernel import compile_cubin
    try:
        _C.nvrtc_id()
    except Exception as e:
        pytest.skip(f"NVRTC is not available: {e}")
    source, cubin = compile_cubin(source_kernel(), CUDA, _include_dir())
    assert source == COPY_SOURCE
    assert cubin[:4] == b"\x7fELF" and b"external_copy" in cubin
    bad = source_kernel('extern "C" __global__ void external_copy(float* A) { undefined_name(A); }')
    with pytest.raises(Exception, match="undefined_name"):
        compile_cubin(bad, CUDA, _include_dir())


@tilelang.testing.requires_cuda
def test_source_kernel_runs_on_the_gpu():
    k = tilelang.compile(source_kernel(), out_idx=[1], target="cuda")
    for n in (1000, 77):
        a = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(k(a)), a * 2)
    assert k.get_kernel_source() == COPY_SOURCE
    with pytest.raises(ValueError, match=r"dynamic dimension 'N' is 8 from A\.shape\[0\] but 9 from B\.shape\[0\]"):
        k(np.zeros(8, np.float32), np.zeros(9, np.float32))
    # a second compile of the same source is a cache hit
    assert tilelang.compile(source_kernel(), out_idx=[1], target="cuda").cache_hit == "memory"


def test_tilelang_target_environment_variable(monkeypatch):
    from tilelang.jit.backends import resolve_target
    monkeypatch.setenv("TILELANG_TARGET", "cuda -arch=sm_80")
    assert resolve_target("auto") == "cuda -arch=sm_80"
    assert resolve_target("cpu") == "cpu"  # an explicit target wins
    monkeypatch.setenv("TILELANG_TARGET", "cpu")
    assert resolve_target("auto") == "cpu"
