"""The JIT layer: caching across processes, IR dumps, argument forms, kernel inspection."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangUnsupportedError


def scale_kernel(n, factor):
    @T.prim_func
    def scale(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                B[bx * 64 + i] = A[bx * 64 + i] * factor

    return scale


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_disk_cache_hit_in_new_process(cache_dir, tmp_path):
    script = tmp_path / "k.py"
    script.write_text(textwrap.dedent("""
        import sys, time, numpy as np
        t0 = time.perf_counter()
        import tilelang, tilelang.language as T
        @T.prim_func
        def add3(A: T.Tensor((100,), "float32"), B: T.Tensor((100,), "float32")):
            with T.Kernel(2, threads=64) as bx:
                for i in T.Parallel(64):
                    B[bx * 64 + i] = A[bx * 64 + i] + 3.0
        k = tilelang.compile(add3, out_idx=[-1], target="cpu")
        a = np.arange(100, dtype=np.float32)
        assert np.array_equal(k(a), a + 3)
        print(k.cache_hit or "compiled", f"{k.compile_time * 1e3:.1f}")
    """))
    env = dict(os.environ, TILELANG_CACHE_DIR=str(cache_dir))
    env.pop("TILELANG_DISABLE_CACHE", None)
    first = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split()[0] == "compiled"
    second = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert second.returncode == 0, second.stderr
    status, ms = second.stdout.split()
    assert status == "disk"
    assert float(ms) < 200, f"a cache hit took {ms} ms"


def test_memory_cache_and_distinct_keys(cache_dir):
    k1 = tilelang.compile(scale_kernel(128, 2.0), out_idx=[-1], target="cpu")
    k2 = tilelang.compile(scale_kernel(128, 2.0), out_idx=[-1], target="cpu")
    k3 = tilelang.compile(scale_kernel(128, 3.0), out_idx=[-1], target="cpu")
    assert k2.cache_hit == "memory"
    assert k1.cache_key == k2.cache_key != k3.cache_key
    a = np.random.default_rng(0).standard_normal(128).astype(np.float32)
    np.testing.assert_array_equal(k1(a), a * np.float32(2.0))
    np.testing.assert_array_equal(k3(a), a * np.float32(3.0))


def test_disable_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    k = tilelang.compile(scale_kernel(64, 5.0), out_idx=[-1], target="cpu")
    assert not (tmp_path / "c").exists()
    np.testing.assert_array_equal(k(np.ones(64, np.float32)), np.full(64, 5.0, np.float32))


def test_print_ir_after_each_pass(tmp_path):
    script = tmp_path / "p.py"
    script.write_text(textwrap.dedent("""
        import tilelang, tilelang.language as T
        @T.prim_func
        def neg(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                S = T.alloc_shared((32,), "float32")
                T.copy(A, S)
                for i in T.Parallel(32):
                    B[i] = -S[i]
        tilelang.compile(neg, target="cpu")
    """))
    env = dict(os.environ, TL_PRINT_IR="1", TILELANG_DISABLE_CACHE="1")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    for name in ("check_tile_ops", "lower_tile_ops", "simplify"):
        assert f"after {name} (" in r.stderr
    assert "T.copy(A, S)" in r.stderr          # before lowering
    assert " ms) ====" in r.stderr             # per-pass timing


def test_outputs_passed_explicitly_and_scalars(cache_dir):
    @T.prim_func
    def axpy(X: T.Tensor((50,), "float32"), Y: T.Tensor((50,), "float32"), a: T.float32, n: T.int32):
        with T.Kernel(1, threads=64) as bx:
            for i in T.Parallel(64):
                if i < n:
                    Y[i] = a * X[i] + Y[i]

    k = tilelang.compile(axpy, target="cpu")
    x = np.arange(50, dtype=np.float32)
    y = np.ones(50, dtype=np.float32)
    assert k(x, y, 2.0, 40) is None
    expect = np.ones(50, np.float32)
    expect[:40] += 2.0 * x[:40]
    np.testing.assert_array_equal(y, expect)
    with pytest.raises(TypeError, match="'a' must be a float32 scalar"):
        k(x, y, "2", 40)


def test_dlpack_producer(cache_dir):
    class Producer:
        """Exposes an array only through the DLPack protocol."""

        def __init__(self, arr):
            self._arr = arr

        def __dlpack__(self, **kwargs):
            return self._arr.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self._arr.__dlpack_device__()

    k = tilelang.compile(scale_kernel(64, 2.0), out_idx=[-1], target="cpu")
    a = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(k(Producer(a)), a * 2)


def test_out_idx_negative_and_multiple(cache_dir):
    @T.prim_func
    def split(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32"), C: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16) as bx:
            for i in T.Parallel(16):
                B[i] = A[i] + 1.0
                C[i] = A[i] * 2.0

    k = tilelang.compile(split, out_idx=[-2, -1], target="cpu")
    a = np.arange(16, dtype=np.float32)
    b, c = k(a)
    np.testing.assert_array_equal(b, a + 1)
    np.testing.assert_array_equal(c, a * 2)
    with pytest.raises(ValueError, match="out_idx 3 is out of range"):
        tilelang.compile(split, out_idx=[3], target="cpu")


def test_kernel_source_and_lower(cache_dir):
    func = scale_kernel(256, 4.0)
    k = tilelang.compile(func, out_idx=[-1], target="cpu")
    src = k.get_kernel_source()
    assert "scale_entry" in src and "#pragma omp" in src
    lowered = tilelang.lower(func, target="cpu")
    assert "T.Kernel" in lowered and "T.copy" not in lowered


@pytest.mark.skipif(tilelang.cuda_available(), reason="the error is for machines without a CUDA device")
def test_cuda_target_without_a_device_is_a_clear_error():
    with pytest.raises(TileLangUnsupportedError, match="target 'cuda' needs a CUDA device") as info:
        tilelang.compile(scale_kernel(64, 1.0), target="cuda")
    assert info.value.file == __file__  # the compile call's line


@pytest.mark.skipif(tilelang.cuda_available(), reason="the error is for machines without a CUDA device")
def test_compile_in_a_worker_thread_points_at_the_user_code():
    """A compile from a thread pool (as the autotuner's) was located in concurrent/futures;
    the innermost frame outside tilelang and Python's library is the user's, and without one
    the kernel's definition."""
    import concurrent.futures
    func = scale_kernel(64, 1.0)

    def build():
        return tilelang.compile(func, target="cuda -arch=sm_90a")

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        with pytest.raises(TileLangUnsupportedError, match="no usable CUDA device") as info:
            pool.submit(build).result()
    assert info.value.file == __file__ and "concurrent" not in str(info.value)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        with pytest.raises(TileLangUnsupportedError, match="no usable CUDA device") as info:
            pool.submit(tilelang.compile, func, target="cuda -arch=sm_90a").result()
    assert (info.value.file, info.value.line) == (func.file, func.line), str(info.value)


def test_cuda_source_without_a_device():
    lowered = tilelang.lower(scale_kernel(300, 2.0), target="cuda -arch=sm_90a")
    assert "T.get_thread_binding" in lowered and "T.Parallel" not in lowered


def test_unknown_target_lists_the_known_ones():
    with pytest.raises(TileLangUnsupportedError, match="unknown target 'cudaa'"):
        tilelang.compile(scale_kernel(64, 1.0), target="cudaa")


def test_pass_configs(cache_dir):
    k = tilelang.compile(scale_kernel(64, 1.5), out_idx=[-1], target="cpu",
                         pass_configs={"tl.disable_warp_specialized": True})
    np.testing.assert_array_equal(k(np.ones(64, np.float32)), np.full(64, 1.5, np.float32))
    with pytest.raises(ValueError, match="unknown pass config 'fast'"):
        tilelang.compile(scale_kernel(64, 1.5), target="cpu", pass_configs={"fast": True})


def test_profiler(cache_dir):
    k = tilelang.compile(scale_kernel(64, 2.0), out_idx=[-1], target="cpu")
    prof = k.get_profiler()
    assert prof.do_bench(warmup=1, rep=3) > 0
    prof.assert_allclose(lambda a: a * 2.0, rtol=1e-6, atol=1e-6)
    with pytest.raises(AssertionError):
        prof.assert_allclose(lambda a: a * 3.0, rtol=1e-6, atol=1e-6)


def test_constant_index_outside_a_tile_is_an_error(cache_dir):
    from tilelang.errors import TileLangBoundsError

    @T.prim_func
    def poke(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16) as bx:
            S = T.alloc_shared((8,), "float32")
            for i in T.serial(4):
                S[i + 8] = A[i]  # always past the end of S

    with pytest.raises(TileLangBoundsError, match=r"index range \[8, 11\] is outside dimension 0 of buffer 'S'"):
        tilelang.compile(poke, target="cpu")


def test_cache_key_changes_with_the_compiler_core(cache_dir, monkeypatch):
    from tilelang.jit import kernel as kernel_module
    k1 = tilelang.compile(scale_kernel(64, 7.0), out_idx=[-1], target="cpu")
    monkeypatch.setattr(kernel_module, "_core_id", "another-build")
    k2 = tilelang.compile(scale_kernel(64, 7.0), out_idx=[-1], target="cpu")
    assert k1.cache_key != k2.cache_key
