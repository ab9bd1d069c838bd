"""What is particular to target webgpu: subgroup operations, which the adapter may offer at
a size it alone knows, and the run-time check that keeps a kernel lowered for the wrong
size from returning wrong numbers."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangUnsupportedError
from tilelang.jit import webgpu

from kernels.reduction import reduce_tile
from kernels.softmax import softmax
from conftest import selected_targets, target_unavailable_reason



@pytest.fixture
def adapter():
    """Skips unless webgpu is among this run's targets and its adapter works (probed in a
    child process first by conftest)."""
    if "webgpu" not in selected_targets():
        pytest.skip("target 'webgpu' is not among this run's targets (TILELANG_TEST_TARGETS)")
    reason = target_unavailable_reason("webgpu")
    if reason is not None:
        pytest.skip(f"target 'webgpu' not available: {reason}")


@pytest.fixture
def subgroups(adapter):
    """The adapter's subgroup size; skips when it offers no usable subgroups."""
    if webgpu.subgroup_size() < 2:
        pytest.skip("this adapter offers no subgroups of consecutive threads (the 'subgroup' feature, probed)")
    return webgpu.subgroup_size()


def whole_tile_max(N, threads):
    """Out[b] = max(X[b*N:(b+1)*N]): a rank-1 fragment reduced to one value."""

    @T.prim_func
    def main(X: T.Tensor((4 * N,), "float32"), Out: T.Tensor((4,), "float32")):
        with T.Kernel(4, threads=threads) as bx:
            x = T.alloc_fragment((N,), "float32")
            m = T.alloc_fragment((1,), "float32")
            T.copy(X[bx * N], x)
            T.reduce_max(x, m, dim=0)
            for i in T.Parallel(1):
                Out[bx + i] = m[i]

    return main


def _run_rowsum(target, rng, threads=128):
    x = rng.standard_normal((64, 256)).astype(np.float32)
    init = np.zeros(64, np.float32)
    out = np.zeros(64, np.float32)
    k = tilelang.compile(reduce_tile(64, 256, "sum", 1, threads=threads), target=target)
    k(x, init, out)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
    return k


def test_reductions_use_subgroup_shuffles(subgroups, rng):
    k = _run_rowsum("webgpu", rng)
    assert "subgroupShuffleXor" in k.get_kernel_source()
    assert "did not match" not in k.get_lowering_report()

    x = rng.standard_normal((64, 512)).astype(np.float32)
    y = tilelang.compile(softmax(64, 512), out_idx=[1], target="webgpu")(x)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("threads", [64, 256])
def test_whole_tile_reduction_with_subgroups(subgroups, rng, threads):
    x = rng.standard_normal(4 * 1024).astype(np.float32)
    out = np.zeros(4, np.float32)
    k = tilelang.compile(whole_tile_max(1024, threads), target="webgpu")
    k(x, out)
    assert "subgroupShuffleXor" in k.get_kernel_source()
    np.testing.assert_array_equal(out, x.reshape(4, -1).max(1))


def test_wrong_subgroup_size_falls_back_to_workgroup_memory(subgroups, rng):
    # Lowered for subgroups twice (or half) the adapter's size: every thread sees the
    # mismatch, and the kernel reruns, built without shuffles, before anything is copied back.
    wrong = subgroups * 2 if subgroups < 128 else subgroups // 2
    k = _run_rowsum(f"webgpu -subgroup={wrong}", rng)
    assert "did not match the compiled size" in k.get_lowering_report()
    _run_rowsum(f"webgpu -subgroup={wrong}", rng)  # and from then on


def test_subgroups_can_be_turned_off(adapter, rng):
    k = _run_rowsum("webgpu -subgroup=1", rng)
    assert "subgroup" not in k.get_kernel_source()


def test_block_of_partial_subgroups_uses_workgroup_memory(subgroups, rng):
    # A block that is not whole subgroups (its last one would be partial) reduces through
    # workgroup memory alone.
    threads = subgroups * 3 // 2
    if threads < 3:
        pytest.skip("the adapter's subgroups are too small for a block of one and a half")
    k = _run_rowsum("webgpu", rng, threads=threads)
    assert "subgroupShuffleXor" not in k.get_kernel_source()


@pytest.mark.parametrize("bad", ["3", "256", "x", ""])
def test_bad_subgroup_size_is_a_clear_error(bad):
    with pytest.raises(TileLangUnsupportedError, match="the subgroup size must be a power of two up to 128"):
        tilelang.lower(reduce_tile(64, 256, "sum", 1), target=f"webgpu -subgroup={bad}")


def test_subgroup_target_lowers_to_shuffles():
    # No adapter needed: the lowered IR already names the shuffles.
    lowered = tilelang.lower(reduce_tile(64, 256, "sum", 1), target="webgpu -subgroup=32")
    assert "shfl_xor" in lowered
    assert "shfl_xor" not in tilelang.lower(reduce_tile(64, 256, "sum", 1), target="webgpu")


def accumulate_row_sums(M, N, threads=128):
    """Acc[i] += sum_j X[i, j], Acc read and written in place."""

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Acc: T.Tensor((M,), "float32")):
        with T.Kernel(M // 16, threads=threads) as bx:
            x = T.alloc_fragment((16, N), "float32")
            r = T.alloc_fragment((16,), "float32")
            T.copy(X[bx * 16, 0], x)
            T.copy(Acc[bx * 16], r)
            T.reduce_sum(x, r, dim=1, clear=False)
            T.copy(r, Acc[bx * 16])

    return main


def test_device_arrays_stay_on_the_gpu(adapter, rng):
    x = rng.standard_normal((64, 256)).astype(np.float32)
    k = tilelang.compile(softmax(64, 256), out_idx=[1], target="webgpu")
    y = k(webgpu.to_device(x))
    assert isinstance(y, webgpu.DeviceArray) and y.shape == (64, 256) and y.dtype == np.float32
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y.numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    # Chained: the output of one call is the input of the next, with no copy in between.
    z = k(y)
    webgpu.synchronize()
    ey = np.exp(y.numpy() - y.numpy().max(1, keepdims=True))
    np.testing.assert_allclose(np.asarray(z), ey / ey.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_device_array_updated_in_place(adapter, rng):
    x = rng.standard_normal((64, 256)).astype(np.float32)
    acc0 = rng.standard_normal(64).astype(np.float32)
    acc = webgpu.to_device(acc0)
    k = tilelang.compile(accumulate_row_sums(64, 256), target="webgpu")
    k(x, acc)  # a host input and a device in/out argument
    k(webgpu.to_device(x), acc)
    np.testing.assert_allclose(acc.numpy(), acc0 + 2 * x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)


def test_failed_subgroup_check_restores_device_arrays(subgroups, rng):
    # The first dispatch, lowered for the wrong subgroup size, writes wrong sums into Acc;
    # the runtime puts Acc back before it reruns the kernel built without subgroups.
    wrong = subgroups * 2 if subgroups < 128 else subgroups // 2
    x = rng.standard_normal((64, 256)).astype(np.float32)
    acc0 = rng.standard_normal(64).astype(np.float32)
    acc = webgpu.to_device(acc0)
    k = tilelang.compile(accumulate_row_sums(64, 256), target=f"webgpu -subgroup={wrong}")
    k(webgpu.to_device(x), acc)
    assert "did not match the compiled size" in k.get_lowering_report()
    np.testing.assert_allclose(acc.numpy(), acc0 + x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)


def test_device_array_checked_like_any_argument(adapter, rng):
    k = tilelang.compile(softmax(64, 256), out_idx=[1], target="webgpu")
    with pytest.raises(ValueError, match=r"argument 'X' has shape \(64, 128\)"):
        k(webgpu.empty((64, 128), np.float32))
    with pytest.raises(TypeError, match="argument 'X' has dtype int32, expected float32"):
        k(webgpu.empty((64, 256), np.int32))
    cpu = tilelang.compile(softmax(64, 256), out_idx=[1], target="cpu")
    with pytest.raises(ValueError, match="argument 'X' is on device 'webgpu'.*needs cpu memory"):
        cpu(webgpu.empty((64, 256), np.float32))


def test_buffer_over_the_adapter_binding_limit_is_a_clear_error(adapter, rng, monkeypatch):
    k = tilelang.compile(softmax(64, 256), out_idx=[1], target="webgpu")
    # As if the adapter bound no more than 1 KiB (the executable is shared: restored after).
    monkeypatch.setattr(k._executable, "max_buffer_bytes", 1024)
    with pytest.raises(ValueError, match=r"not supported on webgpu: argument 'X' is 65536 bytes; the adapter "
                                         r"binds at most 1024 bytes per buffer"):
        k(rng.standard_normal((64, 256)).astype(np.float32))


def test_missing_wgpu_package_is_a_typed_error(monkeypatch):
    """Without the wgpu package, compiling for webgpu says so (a typed error naming the
    package), not a raw ModuleNotFoundError from inside the runtime."""
    import sys
    from tilelang.errors import TileLangUnsupportedError
    from tilelang.jit import webgpu
    monkeypatch.setattr(webgpu, "_state", {})
    monkeypatch.setitem(sys.modules, "wgpu", None)  # `import wgpu` raises ImportError

    @T.prim_func
    def twice(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = A[i] * 2.0

    with pytest.raises(TileLangUnsupportedError, match=r"target 'webgpu' needs the wgpu package"):
        tilelang.compile(twice, target="webgpu")
