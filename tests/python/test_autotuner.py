"""The autotuner on the CPU target: upstream's two call patterns (@tilelang.autotune over
@tilelang.jit, AutoTuner.from_kernel(...).run()), failing candidates recorded with their
reason, the static filter of the CUDA limits (lowering only) and the cache of results."""

import json
import threading

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.autotuner import AutoTuner, AutotuneResult, check_static_limits, set_autotune_inputs
from tilelang.autotuner import cache as result_cache
from tilelang.profiler import assert_close


@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path, monkeypatch):
    """Each test tunes into its own cache directory, with no results in memory."""
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    monkeypatch.delenv("TILELANG_AUTO_TUNING_DISABLE_CACHE", raising=False)
    monkeypatch.setenv("TILELANG_AUTO_TUNING_QUIET", "1")
    AutoTuner._memory_cache.clear()
    yield
    AutoTuner._memory_cache.clear()


@pytest.fixture
def bench_calls(monkeypatch):
    """Counts the candidates checked and timed."""
    calls = []
    original = AutoTuner._check_and_time

    def counting(self, kernel, warmup, rep):
        calls.append(kernel)
        return original(self, kernel, warmup, rep)

    monkeypatch.setattr(AutoTuner, "_check_and_time", counting)
    return calls


# --------------------------------------------------------------------------- kernels
def gemm_nt(M, N, K, block_M=32, block_N=32, block_K=32, num_stages=2, threads=128, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_N, block_K), dtype)
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return main


def scale_add(N, block=64, variant="ok"):
    """C = 2 A + B, one block of `block` elements per program; variant "wrong" adds 1,
    "bad_gemm" adds a T.gemm whose shapes disagree (an error of the lowering), and a block
    larger than N is refused by the factory itself."""
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


GEMM_CONFIGS = [dict(block_M=bm, block_N=bn) for bm, bn in ((16, 32), (32, 32), (32, 64))]


# --------------------------------------------------------------------------- the decorator
def test_decorator_lazy_gemm(bench_calls):
    @tilelang.autotune(configs=GEMM_CONFIGS, warmup=1, rep=3, ref_prog=lambda A, B: A @ B.T)
    @tilelang.jit(out_idx=[-1], target="cpu")
    def matmul(M, N, K, block_M=64, block_N=64, block_K=32, num_stages=2):
        return gemm_nt(M, N, K, block_M, block_N, block_K, num_stages)

    kernel = matmul(64, 96, 64)
    assert kernel.config in GEMM_CONFIGS
    assert kernel.latency > 0 and kernel.ref_latency > 0
    assert len(bench_calls) == len(GEMM_CONFIGS)
    result = matmul.last_result
    assert isinstance(result, AutotuneResult) and result.config == kernel.config
    assert [r.status for r in result.records] == ["ok"] * len(GEMM_CONFIGS)
    assert result.latency == min(r.latency for r in result.records)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((96, 64)).astype(np.float32)
    np.testing.assert_allclose(kernel(a, b), a @ b.T, rtol=1e-4, atol=1e-4)
    # The same problem again: the tuned kernel, nothing tuned.
    assert matmul(64, 96, 64) is kernel
    assert len(bench_calls) == len(GEMM_CONFIGS)
    assert "timed" in result.summary(flops=2 * 64 * 96 * 64)


def test_decorator_callable_configs_and_given_parameters(bench_calls):
    seen = []

    def configs(N):
        seen.append(N)
        return [dict(block=b) for b in (32, 64, 128) if b <= N]

    @tilelang.autotune(configs=configs, warmup=0, rep=1, ref_prog=ref_scale_add)
    @tilelang.jit(out_idx=[-1], target="cpu")
    def kernel_factory(N, block=16):
        return scale_add(N, block)

    k = kernel_factory(64)
    assert seen == [64] and k.config in ({"block": 32}, {"block": 64})
    assert len(bench_calls) == 2
    # Every tuned parameter given: compiled as asked, nothing timed.
    direct = kernel_factory(64, block=32)
    assert len(bench_calls) == 2 and direct.config is None
    a, b = np.arange(64, dtype=np.float32), np.ones(64, dtype=np.float32)
    np.testing.assert_allclose(direct(a, b), 2 * a + b)


def test_autotune_needs_arguments():
    with pytest.raises(ValueError, match="needs arguments"):
        tilelang.autotune(lambda n: n)
    with pytest.raises(TypeError, match="configs"):
        tilelang.autotune()


# --------------------------------------------------------------------------- programmatic
def test_from_kernel_records_failures(bench_calls):
    configs = [dict(block=64), dict(block=128, variant="wrong"), dict(block=1024),
               dict(block=32, variant="bad_gemm"), dict(block=32)]
    result = (AutoTuner.from_kernel(kernel=lambda **c: scale_add(256, **c), configs=configs)
              .set_compile_args(out_idx=[-1], target="cpu")
              .set_profile_args(ref_prog=ref_scale_add, supply_type=tilelang.TensorSupplyType.Integer)
              .run(warmup=0, rep=2))
    status = {r.index: (r.status, r.reason) for r in result.records}
    assert status[0][0] == "ok" and status[4][0] == "ok"
    assert status[1][0] == "wrong_result" and "differ beyond" in status[1][1]
    assert status[2][0] == "parse_error" and "larger than the problem" in status[2][1]
    assert status[3][0] == "compile_error" and "T.gemm" in status[3][1]
    assert {r.index for r in result.failures()} == {1, 2, 3}
    assert result.config in (configs[0], configs[4])
    assert len(bench_calls) == 3  # the candidates that compiled
    a = np.linspace(-1, 1, 256, dtype=np.float32)
    b = np.full(256, 0.5, dtype=np.float32)
    np.testing.assert_allclose(result.kernel(a, b), ref_scale_add(a, b), rtol=1e-6)


def test_every_candidate_failing_is_an_error():
    tuner = (AutoTuner.from_kernel(kernel=lambda **c: scale_add(64, **c), configs=[dict(variant="wrong")])
             .set_compile_args(out_idx=[-1], target="cpu").set_profile_args(ref_prog=ref_scale_add))
    with pytest.raises(RuntimeError, match="wrong_result"):
        tuner.run(warmup=0, rep=1)


def test_unused_config_keys():
    tuner = AutoTuner.from_kernel(kernel=lambda block=64: scale_add(64, block), configs=[dict(blok=32)])
    with pytest.raises(ValueError, match="Unused keys in config"):
        tuner.set_compile_args(out_idx=[-1], target="cpu").run(warmup=0, rep=1)


def test_compiles_in_a_thread_pool(monkeypatch):
    from tilelang.autotuner.param import CompileArgs
    threads = []
    original = CompileArgs.compile_program

    def recording(self, program):
        threads.append(threading.current_thread().name)
        return original(self, program)

    monkeypatch.setattr(CompileArgs, "compile_program", recording)
    (AutoTuner.from_kernel(kernel=lambda **c: scale_add(128, **c), configs=[dict(block=32), dict(block=64)])
     .set_compile_args(out_idx=[-1], target="cpu").run(warmup=0, rep=1))
    assert len(threads) == 2 and all(name.startswith("tilelang-autotune") for name in threads)


def test_set_autotune_inputs_and_manual_check(bench_calls):
    a = np.arange(128, dtype=np.float32)
    b = np.full(128, 3.0, dtype=np.float32)
    checked = []

    def manual_check(out, ref):
        checked.append(out.copy())
        np.testing.assert_allclose(out, ref)

    with set_autotune_inputs(a, b):
        result = (AutoTuner.from_kernel(kernel=lambda **c: scale_add(128, **c),
                                        configs=[dict(block=32), dict(block=64, variant="wrong")])
                  .set_compile_args(out_idx=[-1], target="cpu")
                  .set_profile_args(ref_prog=ref_scale_add, manual_check_prog=manual_check)
                  .run(warmup=0, rep=1))
    assert result.config == {"block": 32}
    assert [r.status for r in result.records] == ["ok", "wrong_result"]
    np.testing.assert_allclose(checked[0], 2 * a + b)


def test_supply_prog_and_cached_inputs():
    made = []

    def supply(params):
        assert [p.name for p in params] == ["A", "B"]
        made.append(1)
        return [np.ones(64, np.float32), np.zeros(64, np.float32)]

    result = (AutoTuner.from_kernel(kernel=lambda **c: scale_add(64, **c), configs=[dict(block=32), dict(block=64)])
              .set_compile_args(out_idx=[-1], target="cpu")
              .set_profile_args(ref_prog=ref_scale_add, supply_prog=supply, cache_input_tensors=True)
              .run(warmup=0, rep=1))
    assert result.config in ({"block": 32}, {"block": 64}) and len(made) == 1


# --------------------------------------------------------------------------- static filter
def test_static_filter_shared_memory():
    big = gemm_nt(1024, 1024, 1024, block_M=256, block_N=256, block_K=128, num_stages=4, dtype="float16")
    small = gemm_nt(1024, 1024, 1024, block_M=64, block_N=64, block_K=32, num_stages=2, dtype="float16")
    why = check_static_limits(big, "cuda -arch=sm_80")
    assert why is not None and "shared memory" in why and "sm_80" in why
    assert check_static_limits(small, "cuda -arch=sm_80") is None
    assert check_static_limits(big, "cpu") is None


def test_static_filter_registers():
    """A 256 x 256 float32 accumulator on 128 threads is 2 KiB per thread: over the 255
    registers a thread has, rejected before compiling; on 256 threads it fits."""
    spills = gemm_nt(1024, 1024, 1024, block_M=256, block_N=256, block_K=32, num_stages=2, threads=128,
                     dtype="float16")
    fits = gemm_nt(1024, 1024, 1024, block_M=128, block_N=128, block_K=32, num_stages=2, threads=128,
                   dtype="float16")
    assert check_static_limits(spills, "cuda -arch=sm_90a") == (
        "each thread would hold 2048 bytes of arrays, over the 255 registers (1020 bytes) a thread has: "
        "it would spill to local memory")
    assert check_static_limits(fits, "cuda -arch=sm_90a") is None


def test_over_the_limit_configurations_are_never_compiled(monkeypatch):
    from tilelang.autotuner.param import CompileArgs
    compiled = []
    monkeypatch.setattr(CompileArgs, "compile_program", lambda self, program: compiled.append(program))
    tuner = (AutoTuner.from_kernel(kernel=lambda **c: gemm_nt(1024, 1024, 1024, dtype="float16", **c),
                                   configs=[dict(block_M=256, block_N=256, block_K=128, num_stages=4)])
             .set_compile_args(out_idx=[-1], target="cuda -arch=sm_80"))
    with pytest.raises(RuntimeError, match="rejected.*shared memory"):
        tuner.run(warmup=0, rep=1)
    assert compiled == []


# --------------------------------------------------------------------------- cache
def _tuner():
    return (AutoTuner.from_kernel(kernel=lambda **c: scale_add(256, **c), configs=[dict(block=64), dict(block=128)])
            .set_compile_args(out_idx=[-1], target="cpu")
            .set_profile_args(ref_prog=ref_scale_add))


def test_cache_hit_benchmarks_nothing(bench_calls):
    first = _tuner().run(warmup=0, rep=2)
    assert first.cache_hit is None and len(bench_calls) == 2
    # In memory.
    again = _tuner().run(warmup=0, rep=2)
    assert again.cache_hit == "memory" and again.config == first.config and len(bench_calls) == 2
    # On disk (a fresh process has an empty memory cache).
    AutoTuner._memory_cache.clear()
    disk = _tuner().run(warmup=0, rep=2)
    assert disk.cache_hit == "disk" and len(bench_calls) == 2
    assert disk.config == first.config and disk.latency == first.latency
    assert [r.status for r in disk.records] == ["ok", "ok"]
    assert disk.kernel.config == first.config
    a = np.arange(256, dtype=np.float32)
    np.testing.assert_allclose(disk.kernel(a, a), 3 * a)
    # A different configuration space, or different repetitions, is another problem.
    AutoTuner._memory_cache.clear()
    other = _tuner()
    other.configs = [dict(block=64)]
    assert other.run(warmup=0, rep=2).cache_hit is None and len(bench_calls) == 3


def test_corrupt_cache_entry_is_rebuilt(bench_calls, tmp_path):
    _tuner().run(warmup=0, rep=1)
    entries = list((tmp_path / "cache" / "autotuner").rglob("*.json"))
    assert len(entries) == 1
    for garbage in ("{not json", json.dumps({"format": 1, "key": entries[0].stem, "best_index": 7})):
        entries[0].write_text(garbage)
        AutoTuner._memory_cache.clear()
        n = len(bench_calls)
        result = _tuner().run(warmup=0, rep=1)
        assert result.cache_hit is None and len(bench_calls) == n + 2
        assert json.loads(entries[0].read_text())["best_index"] in (0, 1)
    AutoTuner._memory_cache.clear()
    assert _tuner().run(warmup=0, rep=1).cache_hit == "disk"


def test_cache_can_be_disabled(bench_calls, monkeypatch):
    monkeypatch.setenv("TILELANG_AUTO_TUNING_DISABLE_CACHE", "1")
    assert not result_cache.enabled()
    _tuner().run(warmup=0, rep=1)
    _tuner().run(warmup=0, rep=1)
    assert len(bench_calls) == 4


# --------------------------------------------------------------------------- checks
def test_assert_close_mismatch_ratio():
    ref = np.zeros(100)
    ours = ref.copy()
    ours[:2] = 1.0
    assert_close(ours, ref, max_mismatched_ratio=0.02)
    with pytest.raises(AssertionError, match="2 of 100"):
        assert_close(ours, ref, max_mismatched_ratio=0.01)
    with pytest.raises(AssertionError):
        assert_close(ours, ref)


def test_assert_close_torch_tensors_compared_in_place():
    """Two torch tensors are compared with torch (where they live), with the same rule and
    the same message as arrays; bfloat16 against float32 is compared in float32."""
    torch = pytest.importorskip("torch")
    ref = torch.zeros(100)
    ours = ref.clone().to(torch.bfloat16)
    ours[:2] = 1.0
    ours[2] = float("nan")
    assert_close(ours, ref, max_mismatched_ratio=0.03)
    with pytest.raises(AssertionError, match=r"3 of 100 elements \(3\.00%\) differ beyond rtol=0\.01, atol=0\.01 "
                                             r"\(allowed 2\.00%\); largest difference inf"):
        assert_close(ours, ref, max_mismatched_ratio=0.02)
    with pytest.raises(AssertionError, match="shapes differ"):
        assert_close(ours[:10], ref)
    assert_close(ref + 0.005, ref)
    with pytest.raises(AssertionError, match=r"1 of 100 .*largest difference 0\.5"):
        assert_close(torch.where(torch.arange(100) == 7, ref + 0.5, ref), ref)



def test_best_is_the_fastest_and_early_stop(monkeypatch):
    latency_of = {32: 3.0, 64: 1.0, 128: 2.0, 16: 0.5}
    block_of = {}

    def factory(block):
        f = scale_add(128, block)
        block_of[id(f)] = block
        return f

    timed = []

    def fake_time(self, kernel, warmup, rep):
        block = block_of[id(kernel.prim_func)]
        timed.append(block)
        return latency_of[block]

    monkeypatch.setattr(AutoTuner, "_check_and_time", fake_time)
    configs = [dict(block=b) for b in (32, 64, 128, 16)]
    tuner = (AutoTuner.from_kernel(kernel=factory, configs=configs).set_compile_args(out_idx=[-1], target="cpu"))
    assert tuner.run(warmup=0, rep=1).config == {"block": 16}
    # Early stop after one candidate without improvement: 128 is slower than 64, so 16 is
    # never timed.
    AutoTuner._memory_cache.clear()
    timed.clear()
    tuner = (AutoTuner.from_kernel(kernel=factory, configs=configs).set_compile_args(out_idx=[-1], target="cpu"))
    tuner.early_stop = 1
    result = tuner.run(warmup=0, rep=2)
    assert timed == [32, 64, 128] and result.config == {"block": 64}
    assert [r.status for r in result.records] == ["ok", "ok", "ok", "skipped"]
