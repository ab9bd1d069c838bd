"""The autotuner's executors: the local one (the default) and Ray, on a Ray instance started
on this machine with the CPU target. Compilation goes to Ray's CPU workers (their kernel
cache entries come back into this process's cache), checking and timing to a benchmark
worker, and the fastest candidates are timed again here before the best is chosen."""
import sys

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.autotuner import AutoTuner
from tilelang.autotuner.executors import LocalExecutor, RayExecutor, default_executor

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install ray)")
# Ray's workers rebuild the candidates from this module's factory: send it by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def ray_instance():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    monkeypatch.setenv("TILELANG_AUTO_TUNING_QUIET", "1")


def scale_add(N, block=64, variant="ok"):
    """C = 2 A + B; "wrong" adds 1; "bad_gemm" holds a T.gemm whose shapes disagree."""
    if block > N:
        raise ValueError(f"block {block} is larger than the problem ({N})")

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            if variant == "bad_gemm":
                X = T.alloc_shared((16, 16), "float32")
                Y = T.alloc_shared((32, 16), "float32")
                Z = T.alloc_fragment((16, 16), "float32")
                T.gemm(X, Y, Z)
            for i in T.Parallel(block):
                j = bx * block + i
                if j < N:
                    if variant == "wrong":
                        C[j] = A[j] * 2.0 + B[j] + 1.0
                    else:
                        C[j] = A[j] * 2.0 + B[j]

    return main


def ref_scale_add(A, B):
    return A * 2.0 + B


CONFIGS = [dict(block=64), dict(block=128, variant="wrong"), dict(block=1024), dict(block=32, variant="bad_gemm"),
           dict(block=32), dict(block=128)]


def tune(executor):
    def factory(**config):
        return scale_add(256, **config)

    return (AutoTuner.from_kernel(kernel=factory, configs=CONFIGS)
            .set_compile_args(out_idx=[-1], target="cpu")
            .set_profile_args(ref_prog=ref_scale_add, supply_type=tilelang.TensorSupplyType.Integer)
            .set_executor(executor)
            .run(warmup=1, rep=3))


def outcomes(result):
    return [(r.index, r.status) for r in result.records]


def test_ray_gives_the_local_outcomes(ray_instance, tmp_path, monkeypatch):
    local = tune(LocalExecutor())
    # The same space from the result cache would time nothing: a fresh cache for the Ray run.
    AutoTuner._memory_cache.clear()
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache-ray"))
    executor = RayExecutor(remeasure=2)
    remote = tune(executor)
    assert outcomes(remote) == outcomes(local) == [
        (0, "ok"), (1, "wrong_result"), (2, "parse_error"), (3, "compile_error"), (4, "ok"), (5, "ok")]
    assert remote.cache_hit is None
    # Compiled on the workers: every entry came back and loaded here from the disk cache.
    assert executor.compiled_here == []
    timed = [r for r in remote.records if r.status == "ok"]
    assert all(r.worker.startswith("ray:") for r in timed if "re-measured" not in r.worker)
    remeasured = [r for r in timed if "re-measured" in r.worker]
    assert len(remeasured) == 2
    assert all(r.worker.startswith("ray:") and " ms; local (re-measured)" in r.worker for r in remeasured)
    # Each timing carries its noise; the summary gives it per worker.
    assert all(r.noise is not None and r.noise >= 0 for r in timed)
    summary = remote.summary()
    assert "timed on ray:" in summary and "noise (middle half of the times over the median)" in summary
    # The best is chosen among the candidates timed again here.
    assert remote.config in [r.config for r in remeasured]
    assert "differ beyond" in remote.records[1].reason and "T.gemm" in remote.records[3].reason
    a = np.linspace(-1, 1, 256, dtype=np.float32)
    b = np.full(256, 0.5, dtype=np.float32)
    np.testing.assert_allclose(remote.kernel(a, b), ref_scale_add(a, b), rtol=1e-6)


def test_ray_result_is_cached(ray_instance):
    AutoTuner._memory_cache.clear()
    first = tune(RayExecutor())
    assert first.cache_hit is None
    AutoTuner._memory_cache.clear()  # from the disk
    again = tune(RayExecutor())
    assert again.cache_hit == "disk" and again.config == first.config
    assert again.records[0].worker == first.records[0].worker != ""
    assert outcomes(again) == outcomes(first)


def test_executor_choice():
    with pytest.raises(ValueError, match=r"unknown executor 'gpu' \(use \"local\", \"ray\""):
        AutoTuner.from_kernel(kernel=scale_add, configs=CONFIGS).set_executor("gpu")
    with pytest.raises(TypeError, match="an executor needs compile\\(\\) and bench\\(\\), got int"):
        AutoTuner.from_kernel(kernel=scale_add, configs=CONFIGS).set_executor(3)
    assert isinstance(default_executor(), LocalExecutor)
