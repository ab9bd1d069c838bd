"""Names TileLang programs use outside the kernel language proper: pass config keys, tensor
supply kinds and the profiler, the cache switches, tilelang.testing / utils / math, dtype
objects, T.Serial, and the JIT object's .compile()."""
import enum

import numpy as np
import pytest

import tilelang
import tilelang.language as T
import tilelang.testing
from tilelang import PassConfigKey, TensorSupplyType
from tilelang.jit import cache as jit_cache


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    return tmp_path / "cache"


@pytest.fixture
def cache_switch():
    """Restores the process-wide cache switch after a test that flips it."""
    saved = jit_cache._switch
    yield
    jit_cache._switch = saved


def scale_kernel(n, factor, dtype="float32"):
    @T.prim_func
    def scale(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                B[bx * 64 + i] = A[bx * 64 + i] * factor

    return scale


# ---------------------------------------------------------------- PassConfigKey
def test_pass_config_key_members_are_the_option_strings():
    assert issubclass(PassConfigKey, str) and issubclass(PassConfigKey, enum.Enum)
    assert tilelang.transform.PassConfigKey is PassConfigKey
    assert PassConfigKey.TL_DISABLE_TMA_LOWER.value == "tl.disable_tma_lower"
    assert PassConfigKey.TL_DISABLE_WARP_SPECIALIZED == "tl.disable_warp_specialized"
    assert PassConfigKey.TL_ENABLE_FAST_MATH.value == "tl.enable_fast_math"
    assert PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS.value == "tl.disable_safe_memory_legalize"
    assert PassConfigKey.TIR_DISABLE_VECTORIZE.value == "tir.disable_vectorize"
    assert PassConfigKey.CUDA_KERNELS_OUTPUT_DIR.value == "cuda.kernels_output_dir"
    assert PassConfigKey("tl.disable_wgmma") is PassConfigKey.TL_DISABLE_WGMMA
    # a member and its string are the same dict key
    assert {PassConfigKey.TL_DISABLE_WGMMA: 1}["tl.disable_wgmma"] == 1


def test_every_pass_config_key_is_accepted_by_compile(cache_dir):
    from tilelang.jit.kernel import KNOWN_PASS_CONFIGS
    top_level = [m for m in PassConfigKey if "." in m.value]
    assert len(top_level) >= 50
    missing = [m.name for m in top_level if m.value not in KNOWN_PASS_CONFIGS]
    assert missing == []
    # the sub-keys of TL_SIMPLIFY are not options of their own
    assert PassConfigKey.TL_SIMPLIFY_ENABLE_LET_INLINE.value == "enable_simplify_let_inline"
    assert "enable_simplify_let_inline" not in KNOWN_PASS_CONFIGS


def test_pass_configs_keyed_by_members_compile_and_run(cache_dir):
    configs = {PassConfigKey.TL_DISABLE_TMA_LOWER: True, PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True,
               PassConfigKey.TL_ENABLE_FAST_MATH: False}
    k = tilelang.compile(scale_kernel(128, 3.0), out_idx=[-1], target="cpu", pass_configs=configs)
    assert k.pass_configs == {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True,
                              "tl.enable_fast_math": False}
    assert all(type(key) is str for key in k.pass_configs)
    a = np.arange(128, dtype=np.float32)
    np.testing.assert_array_equal(k(a), a * np.float32(3.0))

    @tilelang.jit(out_idx=[-1], target="cpu", pass_configs={PassConfigKey.TL_DISABLE_WGMMA: True})
    def scaled(n):
        return scale_kernel(n, 0.5)

    np.testing.assert_array_equal(scaled(64)(np.ones(64, np.float32)), np.full(64, 0.5, np.float32))


def test_pass_configs_change_the_cache_key_but_members_equal_strings(cache_dir):
    k1 = tilelang.compile(scale_kernel(64, 2.0), target="cpu", pass_configs={PassConfigKey.TL_DISABLE_WGMMA: True})
    k2 = tilelang.compile(scale_kernel(64, 2.0), target="cpu", pass_configs={"tl.disable_wgmma": True})
    assert k1.cache_key == k2.cache_key
    assert k2.cache_hit == "memory"


def test_lowering_switch_given_as_member_reaches_the_compiler():
    # tl.disable_tma_lower given as a member must switch TMA off, as the string does.
    from tilelang.jit.backends import switches
    from tilelang.jit.kernel import _check_pass_configs
    configs = _check_pass_configs({PassConfigKey.TL_DISABLE_TMA_LOWER: True, PassConfigKey.TL_DISABLE_WGMMA: False})
    assert switches(configs) == ["tl.disable_tma_lower"]


def test_unknown_pass_config_still_rejected():
    with pytest.raises(ValueError, match="unknown pass config 'tl.disable_tma_lowr'"):
        tilelang.compile(scale_kernel(64, 1.0), target="cpu", pass_configs={"tl.disable_tma_lowr": True})
    with pytest.raises(ValueError, match="unknown pass config 'enable_simplify_let_inline'"):
        tilelang.compile(scale_kernel(64, 1.0), target="cpu",
                         pass_configs={PassConfigKey.TL_SIMPLIFY_ENABLE_LET_INLINE: True})


# ---------------------------------------------------------------- TensorSupplyType and the profiler
def test_tensor_supply_type_enum():
    assert [(m.name, m.value) for m in TensorSupplyType] == [
        ("Integer", 1), ("Uniform", 2), ("Normal", 3), ("Randn", 4), ("Zero", 5), ("One", 6), ("Auto", 7)]
    assert tilelang.utils.TensorSupplyType is TensorSupplyType
    assert tilelang.utils.tensor.TensorSupplyType is TensorSupplyType


class _Param:
    def __init__(self, shape, dtype, name="X"):
        self.shape, self.dtype, self.name = shape, dtype, name


def test_tensor_supply_values():
    from tilelang.utils.tensor import get_tensor_supply
    rng = np.random.default_rng(0)

    def make(kind, dtype, shape=(64, 64)):
        return get_tensor_supply(kind, rng)(_Param(shape, dtype))

    x = make(TensorSupplyType.Integer, "float32")
    assert x.dtype == np.float32 and x.shape == (64, 64)
    assert set(np.unique(x)) <= {-2, -1, 0, 1, 2} and len(np.unique(x)) == 5
    u = make(TensorSupplyType.Integer, "uint8")
    assert u.dtype == np.uint8 and set(np.unique(u)) == {0, 1, 2}
    b = make(TensorSupplyType.Integer, "bool")
    assert b.dtype == np.bool_ and set(np.unique(b)) == {False, True}
    f = make(TensorSupplyType.Uniform, "float16")
    assert f.dtype == np.float16 and f.min() >= -1 and f.max() <= 1 and len(np.unique(f)) > 100
    n = make(TensorSupplyType.Normal, "float32", (4096,))
    assert abs(n.mean() + 1.0) < 0.1 and abs(n.std() - 1.0) < 0.1  # mean -1, std 1
    r = make(TensorSupplyType.Randn, "float32", (4096,))
    assert abs(r.mean()) < 0.1 and abs(r.std() - 1.0) < 0.1
    assert (make(TensorSupplyType.Zero, "int32") == 0).all() and make(TensorSupplyType.Zero, "int32").dtype == np.int32
    assert (make(TensorSupplyType.One, "float64") == 1).all()
    assert (make(TensorSupplyType.Uniform, "int8") == 1).all()  # int8 cannot hold uniform values
    a = make(TensorSupplyType.Auto, "float32")
    assert a.min() >= -1 and a.max() <= 1 and len(np.unique(a)) > 100
    ai = make(TensorSupplyType.Auto, "int32")
    assert set(np.unique(ai)) <= {-2, -1, 0, 1, 2}
    bf = make(TensorSupplyType.Auto, "bfloat16")
    assert bf.dtype.name == "bfloat16"
    with pytest.raises(TypeError, match="tensor_supply_type must be a tilelang.TensorSupplyType"):
        get_tensor_supply("Auto")


def test_profiler_uses_the_supply_type(cache_dir):
    k = tilelang.compile(scale_kernel(256, 2.0), out_idx=[-1], target="cpu")
    assert k.get_profiler().supply_type is TensorSupplyType.Auto
    ones = k.get_profiler(tensor_supply_type=TensorSupplyType.One)
    (a,) = ones._get_inputs()
    # torch tensors on the host where torch is installed (upstream's reference programs use
    # torch's methods), numpy arrays otherwise
    torch = pytest.importorskip("torch")
    assert isinstance(a, torch.Tensor) and a.device.type == "cpu"
    assert a.dtype == torch.float32 and tuple(a.shape) == (256,) and bool((a == 1).all())
    np.testing.assert_array_equal(np.asarray(ones.run_once()), np.full(256, 2.0, np.float32))
    ints = k.get_profiler(TensorSupplyType.Integer)
    (x,) = ints._get_inputs()
    assert set(np.unique(x)) <= {-2, -1, 0, 1, 2}
    ints.assert_allclose(lambda a: a * 2, atol=0, rtol=0)
    assert ints.do_bench(warmup=1, rep=2) > 0
    assert len(ints._get_inputs(with_output=True)) == 2
    # a reference written with torch's methods, as upstream's are
    ints.assert_allclose(lambda a: a.pow(1) * 2, atol=0, rtol=0)


def test_profiler_func_adapter_and_consistency(cache_dir):
    """Upstream's programs call profiler.func(...) (the kernel), swap the kernel with
    with_default_adapter, and check for races with assert_consistent."""
    k = tilelang.compile(scale_kernel(128, 3.0), out_idx=[-1], target="cpu")
    prof = k.get_profiler(TensorSupplyType.Integer)
    (a,) = prof._get_inputs()
    assert prof.func is k and prof.adapter is k
    np.testing.assert_array_equal(np.asarray(prof.func(a)), np.asarray(a) * 3)
    prof.assert_consistent(repeat=3)
    calls = []

    def flaky(x):
        calls.append(1)
        return x * (3 + (len(calls) == 2))  # the second run differs

    assert prof.with_default_adapter(flaky) is prof
    assert prof.params == k.params  # the stand-in keeps the kernel's description
    with pytest.raises(AssertionError, match="output 0 of run 2 differs from run 1"):
        prof.assert_consistent(repeat=3)
    with pytest.raises(TypeError, match="with_default_adapter expects a callable kernel, got int"):
        prof.with_default_adapter(3)


def test_profiler_assert_allclose_honours_max_mismatched_ratio(cache_dir):
    k = tilelang.compile(scale_kernel(1000, 2.0), out_idx=[-1], target="cpu")
    prof = k.get_profiler(TensorSupplyType.Randn)

    def off_by_one_in(count):
        def ref(a):
            r = a * 2
            r[:count] += 1.0
            return r
        return ref

    prof.assert_allclose(off_by_one_in(5), atol=1e-5, rtol=1e-5, max_mismatched_ratio=0.01)  # 5 <= 10
    with pytest.raises(AssertionError, match="Too many mismatched elements: 11 > 10"):
        prof.assert_allclose(off_by_one_in(11), atol=1e-5, rtol=1e-5, max_mismatched_ratio=0.01)
    with pytest.raises(AssertionError, match="Too many mismatched elements: 1 > 0"):
        prof.assert_allclose(off_by_one_in(1), atol=1e-5, rtol=1e-5, max_mismatched_ratio=0.0)


def test_profiler_seed_follows_set_random_seed(cache_dir):
    k = tilelang.compile(scale_kernel(64, 1.0), out_idx=[-1], target="cpu")
    tilelang.testing.set_random_seed(7)
    first = k.get_profiler(TensorSupplyType.Randn)._get_inputs()[0]
    tilelang.testing.set_random_seed(7)
    again = k.get_profiler(TensorSupplyType.Randn)._get_inputs()[0]
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, k.get_profiler(TensorSupplyType.Randn)._get_inputs()[0])


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3", "float16", "int8"])
def test_profiler_inputs_of_every_dtype_are_torch_tensors(cache_dir, dtype):
    """bfloat16 and float8 arrays (ml_dtypes) reach torch through their bits."""
    torch = pytest.importorskip("torch")
    from tilelang.dtypes import torch_dtype

    @T.prim_func
    def copy(A: T.Tensor((64,), dtype), B: T.Tensor((64,), dtype)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = A[i]

    k = tilelang.compile(copy, out_idx=[-1], target="cpu")
    tilelang.testing.set_random_seed(5)
    (a,) = k.get_profiler(TensorSupplyType.Integer)._get_inputs()
    tilelang.testing.set_random_seed(5)
    from tilelang.utils.tensor import get_tensor_supply
    want = get_tensor_supply(TensorSupplyType.Integer)(k.params[0])  # the numpy array it comes from
    assert isinstance(a, torch.Tensor) and a.dtype == torch_dtype(dtype)
    raw_torch, raw_numpy = {1: (torch.uint8, np.uint8), 2: (torch.int16, np.int16)}[a.element_size()]
    np.testing.assert_array_equal(a.view(raw_torch).numpy(), want.view(raw_numpy))


def test_profiler_rejects_dynamic_shapes(cache_dir):
    n = T.dynamic("n")

    @T.prim_func
    def copy(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < n:
                    B[bx * 64 + i] = A[bx * 64 + i]

    k = tilelang.compile(copy, out_idx=[-1], target="cpu")
    with pytest.raises(ValueError, match="static shape"):
        k.get_profiler()._get_inputs()


# ---------------------------------------------------------------- cache switches
def test_disable_and_enable_cache(cache_dir, cache_switch):
    assert tilelang.is_cache_enabled() is True
    tilelang.disable_cache()
    assert tilelang.is_cache_enabled() is False
    k1 = tilelang.compile(scale_kernel(64, 4.0), out_idx=[-1], target="cpu")
    k2 = tilelang.compile(scale_kernel(64, 4.0), out_idx=[-1], target="cpu")
    assert k1.cache_hit is None and k2.cache_hit is None  # neither memory nor disk
    assert not cache_dir.exists()
    np.testing.assert_array_equal(k2(np.ones(64, np.float32)), np.full(64, 4.0, np.float32))
    tilelang.enable_cache()
    assert tilelang.is_cache_enabled() is True
    k3 = tilelang.compile(scale_kernel(64, 4.0), out_idx=[-1], target="cpu")
    k4 = tilelang.compile(scale_kernel(64, 4.0), out_idx=[-1], target="cpu")
    assert k3.cache_hit is None and k4.cache_hit == "memory"
    assert cache_dir.exists()


def test_cache_switch_overrides_environment(cache_dir, cache_switch, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    assert tilelang.is_cache_enabled() is False
    tilelang.enable_cache()
    assert tilelang.is_cache_enabled() is True
    jit_cache._switch = None
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "0")
    assert tilelang.is_cache_enabled() is True


def test_clear_cache(cache_dir, cache_switch):
    import tilelang.cache
    tilelang.compile(scale_kernel(64, 6.0), out_idx=[-1], target="cpu")
    assert any(cache_dir.rglob("meta.json"))
    tilelang.cache.clear_cache()
    assert not cache_dir.exists()
    k = tilelang.compile(scale_kernel(64, 6.0), out_idx=[-1], target="cpu")
    assert k.cache_hit is None  # compiled again: memory and disk were emptied


# ---------------------------------------------------------------- tilelang.math, tilelang.cdiv
def test_cdiv_and_next_power_of_2():
    assert tilelang.cdiv is tilelang.math.cdiv
    assert [tilelang.cdiv(a, 4) for a in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]
    assert [tilelang.math.next_power_of_2(x) for x in (1, 2, 3, 5, 64, 65)] == [1, 2, 4, 8, 64, 128]


def test_cdiv_in_a_kernel(cache_dir):
    n = 200

    @T.prim_func
    def blocks(A: T.Tensor((n,), "int32")):
        with T.Kernel(tilelang.cdiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < n:
                    A[bx * 64 + i] = bx

    k = tilelang.compile(blocks, out_idx=[-1], target="cpu")
    np.testing.assert_array_equal(k(), np.arange(n, dtype=np.int32) // 64)


# ---------------------------------------------------------------- tilelang.testing
def test_torch_assert_close():
    from tilelang.testing import torch_assert_close
    assert tilelang.utils.torch_assert_close is torch_assert_close
    a = np.linspace(0, 1, 1000, dtype=np.float32)
    b = a.copy()
    assert torch_assert_close(a, b) is True
    b[:1] += 1.0  # 1 of 1000 off: allowed by the default ratio 0.001
    assert torch_assert_close(a, b) is True
    b[:2] += 1.0
    with pytest.raises(AssertionError, match=r"Too many mismatched elements: 2 > 1 \(0.10% allowed, but get 0.20%\)"):
        torch_assert_close(a, b)
    with pytest.raises(AssertionError, match="First mismatch at index \\[0\\]"):
        torch_assert_close(a, b, max_mismatched_ratio=0)
    with pytest.raises(AssertionError, match="'shape' do not match"):
        torch_assert_close(a, a[:10])
    with pytest.raises(AssertionError, match="'dtype' do not match: float32 != float64"):
        torch_assert_close(a, a.astype(np.float64))
    assert torch_assert_close(a, a.astype(np.float64), check_dtype=False)
    nan = np.array([np.nan, 1.0])
    assert torch_assert_close(nan, nan.copy(), max_mismatched_ratio=0)
    with pytest.raises(AssertionError):
        torch_assert_close(nan, nan.copy(), max_mismatched_ratio=0, equal_nan=False)


def test_assert_allclose_and_set_random_seed():
    tilelang.testing.assert_allclose(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-9]))
    with pytest.raises(AssertionError):
        tilelang.testing.assert_allclose(np.array([1.0, 2.0]), np.array([1.0, 2.001]))
    tilelang.testing.assert_allclose(np.array([1.0, 2.0]), np.array([1.0, 2.001]), rtol=1e-3, atol=0)
    with pytest.raises(AssertionError, match="shapes differ"):
        tilelang.testing.assert_allclose(np.zeros(3), np.zeros((3, 1)))
    tilelang.testing.set_random_seed(3)
    a = np.random.rand(4)
    tilelang.testing.set_random_seed(3)
    np.testing.assert_array_equal(a, np.random.rand(4))


def test_requires_decorators():
    import _pytest.mark
    for deco in (tilelang.testing.requires_cuda, tilelang.testing.requires_cuda_compute_version(9, 0),
                 tilelang.testing.requires_cuda_compute_version_ge(8, 0), tilelang.testing.requires_package("numpy")):
        marks = deco.marks()
        assert len(marks) == 1 and isinstance(marks[0], _pytest.mark.structures.MarkDecorator)
        assert marks[0].name == "skipif"
    assert tilelang.testing.requires_package("numpy").reason() is None
    assert "not installed" in tilelang.testing.requires_package("surely_not_a_module_xyz").reason()
    assert tilelang.testing.requires_llvm.reason() is None
    has_cuda = tilelang.cuda_available()
    assert (tilelang.testing.requires_cuda.reason() is None) == has_cuda
    assert tilelang.testing.requires_cuda_compute_version(99, 0).reason() is not None
    with pytest.raises(ValueError, match="Invalid mode"):
        tilelang.testing.requires_cuda_compute_version(9, 0, mode="ne")

    def f():
        return 1
    decorated = tilelang.testing.requires_package("numpy")(f)
    assert decorated is f and decorated.pytestmark[0].name == "skipif"


@tilelang.testing.requires_package("surely_not_a_module_xyz")
def test_requires_package_skips_this_test():
    raise AssertionError("must have been skipped")


# ---------------------------------------------------------------- tilelang.utils
def test_utils_scope_predicates_and_determine_target():
    from tilelang import utils
    seen = {}

    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            S = T.alloc_shared((64,), "float32")
            F = T.alloc_fragment((64,), "float32")
            L = T.alloc_local((4,), "float32")
            seen.update(A=(utils.is_global(A), utils.is_shared(A)),
                        S=(utils.is_shared(S), utils.is_shared_dynamic(S), utils.is_shared(S, allow_dynamic=False)),
                        F=(utils.is_fragment(F), utils.is_local(F)), L=(utils.is_local(L), utils.is_fragment(L)))
            T.copy(A, S)

    assert seen == {"A": (True, False), "S": (True, True, False), "F": (True, False), "L": (True, False)}
    assert utils.array_reduce([2, 3, 4]) == 24
    assert utils.determine_target("cpu") == "cpu"
    assert utils.determine_target("auto") == ("cpu" if not tilelang.cuda_available() else utils.determine_target("cuda"))


def test_map_torch_type():
    torch = pytest.importorskip("torch")
    from tilelang.utils import map_torch_type
    assert map_torch_type("float16") is torch.float16
    assert map_torch_type("e4m3_float8") is torch.float8_e4m3fn
    assert map_torch_type(T.bfloat16) is torch.bfloat16


# ---------------------------------------------------------------- dtypes
def test_dtype_objects():
    assert T.dtype is tilelang.DataType
    assert isinstance(T.float16, T.dtype) and isinstance(T.float16, str)
    assert T.dtype("float16") == T.float16 == "float16"
    assert T.dtype(float) == "float32" and T.dtype(int) == "int32" and T.dtype(bool) == "bool"
    assert T.dtype(np.float16) == "float16" and T.dtype("half") == "float16"
    assert [T.dtype(n).bits for n in ("float16", "bfloat16", "int8", "float8_e4m3", "int4", "bool", "float64")] == \
        [16, 16, 8, 8, 4, 1, 64]
    assert T.dtype("float16x4").lanes == 4 and T.dtype("float16x4").bits == 16 and T.float32.lanes == 1
    assert T.dtype("float16").itemsize == 2 and T.dtype("float16x4").itemsize == 8
    assert T.float32.as_numpy() == np.float32
    assert 128 // tilelang.DataType("float16").bits == 8
    with pytest.raises(TypeError, match="Invalid DataType"):
        T.dtype(object())


def test_dtype_object_in_a_kernel(cache_dir):
    dt = T.dtype("float16")

    @T.prim_func
    def half_add(A: T.Tensor((64,), dt), B: T.Tensor((64,), dt)):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                B[i] = A[i] + dt(1.5)

    k = tilelang.compile(half_add, out_idx=[-1], target="cpu")
    a = np.arange(64, dtype=np.float16)
    out = k(a)
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, a + np.float16(1.5))


# ---------------------------------------------------------------- T.Serial
def test_serial_alias(cache_dir):
    assert T.Serial is T.serial

    @T.prim_func
    def prefix(A: T.Tensor((16,), "int32"), B: T.Tensor((16,), "int32")):
        with T.Kernel(1, threads=1) as bx:
            acc = T.alloc_var("int32", 0)
            for i in T.Serial(16):
                acc = acc + A[i]
                B[i] = acc

    k = tilelang.compile(prefix, out_idx=[-1], target="cpu")
    a = np.arange(1, 17, dtype=np.int32)
    np.testing.assert_array_equal(k(a), np.cumsum(a).astype(np.int32))


# ---------------------------------------------------------------- JITImpl and .compile()
def test_jit_impl_compile(cache_dir, tmp_path):
    calls = []

    @tilelang.jit(out_idx=[-1], target="cpu", debug_root_path=str(tmp_path / "dbg"))
    def scaled(n, factor=2.0):
        calls.append((n, factor))
        return scale_kernel(n, factor)

    from tilelang.jit import JITImpl
    assert isinstance(scaled, tilelang.jit.JITImpl) and tilelang.JITImpl is tilelang.jit.JITImpl is JITImpl
    assert tilelang.jit.JITKernel is tilelang.JITKernel
    assert scaled.__name__ == "scaled" and scaled.out_idx == [-1] and scaled.target == "cpu"
    k = scaled.compile(128, factor=3.0)
    assert isinstance(k, tilelang.JITKernel)
    # debug_root_path: the source and the program of the last compile
    assert (tmp_path / "dbg" / "tilelang_jit_kernel_scaled.c").read_text() == k.get_kernel_source()
    assert "def scale" in (tmp_path / "dbg" / "tilelang_jit_program_scaled.py").read_text()
    a = np.arange(128, dtype=np.float32)
    np.testing.assert_array_equal(k(a), a * np.float32(3.0))
    k2 = scaled(128, factor=3.0)
    np.testing.assert_array_equal(k2(a), a * np.float32(3.0))
    assert scaled(128, factor=3.0) is k2  # the call caches by arguments
    assert scaled.compile(n=64)(np.ones(64, np.float32)).tolist() == [2.0] * 64
    assert calls == [(128, 3.0), (128, 3.0), (64, 2.0)]
    src = scaled.get_kernel_source(128, factor=3.0)
    assert src == k.get_kernel_source() != scaled.get_kernel_source(64)
    assert scaled.get_tir(32).params[0].name == "A"


def test_jit_impl_par_compile_and_bad_factory(cache_dir):
    @tilelang.jit(out_idx=[-1], target="cpu")
    def scaled(n, factor=2.0):
        if n < 0:
            raise ValueError("n must be >= 0")
        return scale_kernel(n, factor)

    kernels = scaled.par_compile([(64,), {"n": 64, "factor": 5.0}, (-1,)], num_workers=2, ignore_error=True)
    assert kernels[2] is None
    np.testing.assert_array_equal(kernels[1](np.ones(64, np.float32)), np.full(64, 5.0, np.float32))
    with pytest.raises(ValueError, match="n must be >= 0"):
        scaled.par_compile([(-1,)])
    with pytest.raises(ValueError, match="Invalid config type"):
        scaled.par_compile([64])

    @tilelang.jit
    def not_a_kernel(n):
        return n

    with pytest.raises(TypeError, match="must return a @T.prim_func, got int"):
        not_a_kernel.compile(3)


# ---------------------------------------------------------------- names upstream programs use
# (found by running upstream's examples and the tilelang-puzzles solutions unchanged:
# benchmarks/upstream_programs.py)
def test_scoped_buffer_annotations_for_macros(cache_dir):
    from tilelang.language.types import TensorSpec
    for factory, scope in ((T.SharedBuffer, "shared.dyn"), (T.FragmentBuffer, "local.fragment"),
                           (T.LocalBuffer, "local")):
        spec = factory([16, 32], "float16")
        assert isinstance(spec, TensorSpec) and spec.scope == scope and spec.shape == (16, 32)
        assert factory[(16,), "float32"].scope == scope
    assert T.Tensor((4, 4), "float32").scope == "global"

    # the flash-attention examples' macro style: parameters annotated with the scope factories
    @T.macro
    def load_scaled(A: T.Tensor((64,), "float32"), A_shared: T.SharedBuffer([16], "float32"),
                    acc: T.FragmentBuffer([16], "float32"), k: T.int32):
        T.copy(A[k * 16:(k + 1) * 16], A_shared)
        for i in T.Parallel(16):
            acc[i] += A_shared[i] * 2.0

    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16) as bx:
            A_shared = T.alloc_shared([16], "float32")
            acc = T.alloc_fragment([16], "float32")
            T.clear(acc)
            for k in T.serial(4):
                load_scaled(A, A_shared, acc, k)
            T.copy(acc, B)

    k = tilelang.compile(main, out_idx=[-1], target="cpu")
    a = np.arange(64, dtype=np.float32)
    np.testing.assert_allclose(k(a), 2.0 * a.reshape(4, 16).sum(0))


def test_strided_tensor_takes_upstream_argument_order(cache_dir):
    M, N = 8, 16
    spec = T.StridedTensor((M, N), (2 * N, 1), "float16")
    assert spec.shape == (M, N) and spec.strides == (2 * N, 1) and spec.dtype == "float16"
    assert T.StridedTensor[(M, N), (2 * N, 1), "float32"].strides == (2 * N, 1)
    with pytest.raises(ValueError, match="different lengths"):
        T.StridedTensor((M, N), (1,), "float32")

    @T.prim_func
    def copy(A: T.StridedTensor((M, N), (2 * N, 1), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=32) as bx:
            T.copy(A, B)

    k = tilelang.compile(copy, out_idx=[-1], target="cpu")
    big = np.arange(M * 2 * N, dtype=np.float32).reshape(M, 2 * N)
    np.testing.assert_array_equal(k(big[:, :N]), big[:, :N])


def test_tensor_over_another_buffers_data(cache_dir):
    # upstream's convolution example: kernel_flat = T.Tensor((KH * KW * C, F), dtype, kernel.data)
    M, N = 8, 16

    @T.prim_func
    def flat(A: T.Tensor((M, N), "float32"), B: T.Tensor((N, M), "float32"), C: T.Tensor((M * N,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            A_flat = T.Tensor((M * N,), "float32", A.data)
            B_rows = T.Tensor([N, M], "float32", data=B.data)
            for i in T.serial(M * N):
                C[i] = A_flat[i] * 2.0 + B_rows[i // M, i % M]

    k = tilelang.compile(flat, out_idx=[-1], target="cpu")
    a = np.arange(M * N, dtype=np.float32).reshape(M, N)
    b = np.ones((N, M), np.float32)
    np.testing.assert_array_equal(k(a, b), a.reshape(-1) * 2 + 1)
    with pytest.raises(TypeError, match="data must be a buffer's .data"):
        T.Tensor((4,), "float32", 123)


def test_grid_loops(cache_dir):
    M, N = 4, 8

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=1) as bx:
            for i, j in T.grid(M, N):
                B[i, j] = A[i, j] + i * 100 + j

    k = tilelang.compile(main, out_idx=[-1], target="cpu")
    a = np.random.default_rng(0).standard_normal((M, N)).astype(np.float32)
    ii, jj = np.meshgrid(np.arange(M), np.arange(N), indexing="ij")
    np.testing.assert_allclose(k(a), a + ii * 100 + jj, rtol=1e-6)
    with pytest.raises(TypeError, match="at least one extent"):
        T.grid()


def test_if_then_else_frames(cache_dir):
    N = 64

    # upstream's grouped GEMM example: `with T.If(i < actual_rows), T.Then():`
    @T.prim_func
    def then_only(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(N // 16, threads=16) as bx:
            for i in T.Parallel(16):
                with T.If(A[bx * 16 + i] > 0), T.Then():
                    B[bx * 16 + i] = A[bx * 16 + i]

    @T.prim_func
    def then_else(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(N // 16, threads=16) as bx:
            for i in T.Parallel(16):
                with T.If(A[bx * 16 + i] > 0):
                    with T.Then():
                        B[bx * 16 + i] = A[bx * 16 + i]
                    with T.Else():
                        B[bx * 16 + i] = -1.0

    a = np.linspace(-1, 1, N).astype(np.float32)
    b = np.full(N, 7.0, np.float32)
    tilelang.compile(then_only, target="cpu")(a, b)
    np.testing.assert_array_equal(b, np.where(a > 0, a, 7.0))
    np.testing.assert_array_equal(tilelang.compile(then_else, out_idx=[-1], target="cpu")(a),
                                  np.where(a > 0, a, -1.0))

    with pytest.raises(tilelang.errors.TileLangSyntaxError, match=r"T.Then\(\) outside"):
        @T.prim_func
        def stray_then(A: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=16) as bx:
                with T.Then():
                    A[0] = 1.0

    with pytest.raises(tilelang.errors.TileLangSyntaxError, match=r"with T.Then\(\):"):
        @T.prim_func
        def else_first(A: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=16) as bx:
                with T.If(A[0] > 0):
                    with T.Else():
                        A[0] = 1.0


def test_clamp(cache_dir):
    assert T.clamp(5, 0, 3) == 3 and T.clamp(-1, 0, 3) == 0 and T.clamp(2, 0, 3) == 2
    N = 64

    # upstream's per-token FP8 cast: T.clamp(y / s, fp8_min, fp8_max)
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(N):
                B[i] = T.clamp(A[i] * 4.0, -1.5, 0.75)

    a = np.linspace(-1, 1, N).astype(np.float32)
    np.testing.assert_array_equal(tilelang.compile(main, out_idx=[-1], target="cpu")(a),
                                  np.clip(a * 4.0, -1.5, 0.75))


def test_address_of(cache_dir):
    N = 16
    source = 'extern "C" inline void triple(float* p) { p[0] = 3.0f * p[0]; }\n'

    @T.prim_func
    def main(A: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=1, prelude=source) as bx:
            for i in T.serial(N):
                T.call_extern("handle", "triple", T.address_of(A[i]))

    a = np.arange(N, dtype=np.float32)
    b = a.copy()
    tilelang.compile(main, target="cpu")(b)
    np.testing.assert_array_equal(b, 3 * a)

    with pytest.raises(tilelang.errors.TileLangTypeError, match="T.address_of: expected a buffer element"):
        @T.prim_func
        def not_an_element(A: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=1) as bx:
                T.call_extern("handle", "triple", T.address_of(A))


def test_carver_driver_device_queries(monkeypatch):
    from tilelang.carver.arch import driver
    import tilelang.carver.arch.driver as same
    assert driver is same

    class FakeDriver:
        """libcuda's entry points for one device, the attributes of an H100 SXM."""
        attrs = {driver.MULTIPROCESSOR_COUNT: 132, driver.MAX_SHARED_MEMORY_PER_BLOCK: 48 * 1024,
                 driver.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: 228 * 1024, driver.MAX_REGISTERS_PER_BLOCK: 65536,
                 driver.MAX_PERSISTING_L2_CACHE_SIZE: 32 * 1024 * 1024}

        def cuDeviceGet(self, dev, ordinal):
            dev._obj.value = ordinal
            return 0 if ordinal == 0 else 101  # CUDA_ERROR_INVALID_DEVICE

        def cuDeviceGetAttribute(self, value, attr, dev):
            if attr not in self.attrs:
                return 1
            value._obj.value = self.attrs[attr]
            return 0

        def cuDeviceGetName(self, buf, size, dev):
            buf.value = b"NVIDIA H100 80GB HBM3"
            return 0

    monkeypatch.setattr(driver, "_libcuda", FakeDriver())
    assert driver.get_num_sms() == 132
    assert driver.get_device_attribute(driver.MULTIPROCESSOR_COUNT, 0) == 132
    assert driver.get_shared_memory_per_block() == 48 * 1024
    assert driver.get_shared_memory_per_block(format="kb") == 48
    assert driver.get_max_dynamic_shared_size_bytes(format="kb") == 228
    assert driver.get_registers_per_block() == 65536
    assert driver.get_persisting_l2_cache_max_size() == 32 * 1024 * 1024
    assert driver.get_device_name() == "NVIDIA H100 80GB HBM3"
    assert driver.get_device_attribute(12345) is None
    assert driver.get_device_attribute(driver.MULTIPROCESSOR_COUNT, device_id=1) is None
    with pytest.raises(RuntimeError, match="Failed to get device properties"):
        driver.get_num_sms(1)
    with pytest.raises(ValueError, match="Invalid format"):
        driver.get_shared_memory_per_block(format="gb")

    # no driver at all (this machine without a GPU, or a driver that does not initialise)
    monkeypatch.setattr(driver, "_libcuda", False)
    assert driver.get_device_attribute(driver.MULTIPROCESSOR_COUNT) is None
    with pytest.raises(RuntimeError, match="no CUDA driver or device"):
        driver.get_num_sms()


def test_alloc_buffer_by_scope(cache_dir):
    # upstream's FP4 dequantised GEMM: a split-K partial sum in a global workspace made by
    # T.alloc_buffer before the kernels, reduced by a second kernel
    M, S = 64, 4

    @T.prim_func
    def split_sum(A: T.Tensor((S, M), "float32"), B: T.Tensor((M,), "float32")):
        W = T.alloc_buffer([S, M], "float32")
        with T.Kernel(S, threads=32) as bz:
            tile = T.alloc_buffer([M], "float32", scope="shared")
            acc = T.alloc_buffer([M], "float32", scope="local.fragment")
            T.copy(A[bz, 0:M], tile)
            for i in T.Parallel(M):
                acc[i] = tile[i] * (bz + 1)
            T.copy(acc, W[bz, 0:M])
        with T.Kernel(1, threads=32) as bx:
            total = T.alloc_buffer([M], "float32", scope="local.fragment")
            T.clear(total)
            for k in T.serial(S):
                for i in T.Parallel(M):
                    total[i] += W[k, i]
            T.copy(total, B)

    assert len(split_sum.workspace_idx) == 1
    k = tilelang.compile(split_sum, out_idx=[-1], target="cpu")
    a = np.random.default_rng(2).standard_normal((S, M)).astype(np.float32)
    np.testing.assert_allclose(k(a), (a * np.arange(1, S + 1, dtype=np.float32)[:, None]).sum(0), rtol=1e-5)

    with pytest.raises(tilelang.errors.TileLangTypeError, match="T.alloc_buffer: scope 'texture'"):
        @T.prim_func
        def bad(A: T.Tensor((M,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                T.alloc_buffer([M], "float32", scope="texture")


# ---------------------------------------------------------------- T.Kernel repeated
def test_kernel_repeating_the_enclosing_launch_is_the_same_kernel(target):
    """A `with T.Kernel(...)` inside one with the same launch names the same blocks (upstream
    accepts it; a tilelang-puzzles solution repeats the line); another launch is an error."""
    N, BLOCK = 1024, 256

    @T.prim_func
    def relu_mul(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(N // BLOCK, threads=128) as bx:
            with T.Kernel(N // BLOCK, threads=128) as by:
                for i in T.Parallel(BLOCK):
                    C[by * BLOCK + i] = T.max(A[bx * BLOCK + i] * B[by * BLOCK + i], 0.0)

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    c = np.zeros(N, np.float32)
    tilelang.compile(relu_mul, target=target)(a, b, c)
    np.testing.assert_array_equal(c, np.maximum(a * b, 0))

    with pytest.raises(tilelang.errors.TileLangSyntaxError, match="T.Kernel blocks cannot be nested") as e:
        @T.prim_func
        def other(A: T.Tensor((N,), "float32")):
            with T.Kernel(N // BLOCK, threads=128):
                with T.Kernel(N // BLOCK, threads=256):
                    A[0] = 1.0
    assert "same grid, threads and cluster" in str(e.value)


def test_slice_between_two_bound_names_has_the_tiles_extent(target):
    """`A[H0:H1]` with H1 = H0 + 64 (DeepSeek's sparse MLA writes its head range so) is a
    64-row region: the extent is simplified over the names' values."""
    @T.prim_func
    def rows(A: T.Tensor((4, 256, 32), "float32"), B: T.Tensor((4, 256, 32), "float32")):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            S = T.alloc_shared((64, 32), "float32")
            H0 = by * 64
            H1 = H0 + 64
            T.copy(A[bx, H0:H1, :], S)
            T.copy(S, B[bx, H0:H1, :])

    a = np.random.default_rng(5).standard_normal((4, 256, 32)).astype(np.float32)
    b = np.zeros_like(a)
    tilelang.compile(rows, target=target)(a, b)
    np.testing.assert_array_equal(b, a)


def _online_softmax(M, N, BN):
    """Upstream's online-softmax pattern: a running log-sum-exp kept in a one-element
    fragment and updated by a statement outside T.Parallel (every thread runs it)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(M, threads=128) as i_m:
            x = T.alloc_fragment([BN], "float32")
            e = T.alloc_fragment([BN], "float32")
            lse = T.alloc_fragment([1], "float32")
            m = T.alloc_fragment([1], "float32")
            s = T.alloc_fragment([1], "float32")
            T.fill(lse, -T.infinity("float32"))
            for i_n in T.Pipelined(N // BN):
                T.copy(X[i_m, i_n * BN:(i_n + 1) * BN], x)
                T.reduce_max(x, m, dim=0, clear=True)
                for j in T.Parallel(BN):
                    e[j] = T.exp2(x[j] - m[0])
                T.reduce_sum(e, s, dim=0, clear=True)
                lse[0] = m[0] + T.log2(T.exp2(lse[0] - m[0]) + s[0])
            for i_n in T.Pipelined(N // BN):
                T.copy(X[i_m, i_n * BN:(i_n + 1) * BN], x)
                for j in T.Parallel(BN):
                    x[j] = T.exp2(x[j] - lse[0])
                T.copy(x, Y[i_m, i_n * BN:(i_n + 1) * BN])

    return main


def test_fragment_statement_outside_parallel(target):
    X = np.random.default_rng(7).standard_normal((16, 1024)).astype(np.float32)
    Y = np.zeros_like(X)
    tilelang.compile(_online_softmax(16, 1024, 256), target=target)(X, Y)
    e = np.exp2(X - X.max(1, keepdims=True))
    np.testing.assert_allclose(Y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_fragment_statement_outside_parallel_on_cuda():
    """Every thread holds the whole fragment (a broadcast layout) and runs the statement."""
    from tilelang.tools import kernel_layouts
    layouts = kernel_layouts(_online_softmax(16, 1024, 256), "cuda -arch=sm_90a")
    assert layouts["lse"].partition.startswith("broadcast(") and layouts["lse"].replicate_size == 128


def test_statement_on_a_distributed_fragment_is_a_conflict():
    @T.prim_func
    def gemm(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_l, clear_accum=True)
            C_l[0, 0] = 1.0
            T.copy(C_l, C)

    from tilelang import _C
    with pytest.raises(tilelang.errors.TileLangLayoutError, match=r"conflicting layouts for fragment 'C_l': mma\(.*"
                                                                  r"and broadcast\("):
        _C.lower(gemm.handle, "cuda -arch=sm_80")


def test_static_shared_tiles_share_the_planned_pool():
    """Four 16 KiB tiles declared "shared" (64 KiB: more than a kernel may declare statically,
    as upstream's varlen FlashAttention does) are placed with the dynamic ones, reusing dead
    tiles' bytes: 32 KiB, and the CUDA source declares no static shared array."""
    from tilelang import _C

    @T.prim_func
    def chain(A: T.Tensor((128, 64), "float16"), B: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=128):
            Q = T.alloc_shared([128, 64], "float16", "shared")
            K = T.alloc_shared([128, 64], "float16", "shared")
            V = T.alloc_shared([128, 64], "float16", "shared")
            O = T.alloc_shared([128, 64], "float16", "shared")
            T.copy(A, Q)
            T.copy(Q, K)
            T.copy(K, V)
            T.copy(V, O)
            T.copy(O, B)

    lowered = _C.lower(chain.handle, "cuda -arch=sm_80")
    assert "shared memory 32768 bytes (65536 without reuse of dead buffers' bytes)" in lowered.lowering_report()
    assert "__shared__ alignas" not in _C.codegen(lowered, "cuda -arch=sm_80").replace("extern __shared__", "")
    a = np.random.default_rng(2).standard_normal((128, 64)).astype(np.float16)
    b = np.zeros_like(a)
    tilelang.compile(chain, target="cpu")(a, b)
    np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- tilelang.contrib.nvcc
def test_contrib_nvcc_compute_version():
    from tilelang import _C
    from tilelang.contrib import nvcc
    assert nvcc.get_target_compute_version("cuda -arch=sm_90a") == "9.0"
    assert nvcc.get_target_compute_version("cuda -arch=sm_120") == "12.0"
    assert nvcc.parse_compute_version("8.6") == (8, 6)
    assert nvcc.have_tensorcore("7.0") and not nvcc.have_tensorcore("6.1")
    with pytest.raises(ValueError, match="not of the form major.minor"):
        nvcc.parse_compute_version("nine")
    if _C.cuda_device_available():
        assert float(nvcc.get_target_compute_version()) >= 5.0
    else:
        with pytest.raises(RuntimeError, match="no CUDA device to read the compute capability of"):
            nvcc.get_target_compute_version()


# ---------------------------------------------------------------- tvm names around kernels
def test_tvm_names_programs_use(target):
    """`from tilelang import tvm`, then `from tvm import DataType, tir` and tvm.te.var, as
    upstream's dequantisation and dynamic-shape programs write them."""
    import importlib.util
    from tilelang import tvm
    if importlib.util.find_spec("tvm") is not None and not tvm.__name__.startswith("tilelang"):
        pytest.skip("a real TVM is installed: it is the one imported")
    import tvm as imported
    from tvm import DataType, tir
    assert imported is tvm and DataType("float16").bits == 16 and DataType("int4").bits == 4
    with pytest.raises(AttributeError, match=r"tvm.testing is not available"):
        tvm.testing

    def low_nibble_plus(nbit, val, dtype):
        mask = tir.const((1 << nbit) - 1, "uint8")
        return tir.reinterpret("int8", (val & mask) << tir.const(4, "uint8")) >> tir.const(4, "int8")

    n = tvm.te.var("n")

    @T.prim_func
    def main(A: T.Tensor((n,), "uint8"), B: T.Tensor((n,), "int8")):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < n:
                    B[bx * 64 + i] = low_nibble_plus(4, A[bx * 64 + i], "int8")

    a = np.arange(200, dtype=np.uint8)
    b = np.zeros(200, np.int8)
    tilelang.compile(main, target=target)(a, b)
    low = (a & 15).astype(np.int16)
    np.testing.assert_array_equal(b, np.where(low >= 8, low - 16, low).astype(np.int8))
