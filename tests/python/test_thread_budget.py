"""What one thread holds must fit the GPU targets: past 16 KiB of per-thread arrays the
kernel is a compile error at the allocation (compilers and drivers take minutes or hang on
such kernels); on CUDA, past the 255 registers a thread has, the report names the spill."""
import re

import pytest

import tilelang.language as T
from tilelang import _C
from tilelang.errors import TileLangUnsupportedError

GPU_TARGETS = ["cuda -arch=sm_90a", "webgpu"]


def _fragment(rows, cols, threads=128):
    @T.prim_func
    def main(A: T.Tensor((rows, cols), "float32"), B: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1, threads=threads) as bx:  # noqa: F841
            F = T.alloc_fragment((rows, cols), "float32")
            T.copy(A, F)
            T.copy(F, B)

    return main


def _local(n):
    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as bx:  # noqa: F841
            L = T.alloc_local((n,), "float32")
            for i in T.serial(n):
                L[i] = 1.0
            A[0] = L[n - 1]

    return main


@pytest.mark.parametrize("target,limit", [("cuda -arch=sm_90a", r"the target allows 16384"),
                                          ("webgpu", r"WGSL allows 8192 bytes of function-scope variables")])
def test_a_huge_fragment_is_rejected_at_its_line(target, limit):
    with pytest.raises(TileLangUnsupportedError, match=r"each thread would hold 32768 bytes of per-thread arrays "
                                                      r"\('F' adds 32768\); " + limit) as e:
        _C.lower(_fragment(1024, 1024).handle, target)
    assert "T.alloc_fragment((rows, cols)" in str(e.value)


def test_webgpu_holds_wgsl_s_8_kib_a_thread():
    """WGSL's limit of function-scope variables: 8 KiB of arrays a thread compile (a 4 MiB
    fragment over 512 threads of an adapter that has them), 16 KiB do not; CUDA takes 16 KiB."""
    adapter = {"max_threads_per_block": 1024, "max_threads_per_dim": [1024, 1024, 64]}
    _C.lower(_fragment(1024, 1024, threads=512).handle, "webgpu", [], adapter)
    with pytest.raises(TileLangUnsupportedError, match=r"not supported on webgpu: each thread would hold 16384 bytes"):
        _C.lower(_fragment(1024, 1024, threads=256).handle, "webgpu", [], adapter)
    _C.lower(_fragment(1024, 1024, threads=256).handle, "cuda -arch=sm_90a")


@pytest.mark.parametrize("target", GPU_TARGETS)
def test_a_huge_local_array_is_rejected(target):
    with pytest.raises(TileLangUnsupportedError, match=r"'L' adds 4000000"):
        _C.lower(_local(1000000).handle, target)


def test_spills_are_a_named_slower_path_on_cuda():
    report = _C.lower(_fragment(256, 256).handle, "cuda -arch=sm_90a").lowering_report()  # 2 KiB a thread
    assert "each thread holds 2048 bytes of arrays [slower path: more than the 255 registers" in report
    fits = _C.lower(_fragment(128, 128).handle, "cuda -arch=sm_90a").lowering_report()  # 512 bytes
    assert "each thread holds" not in fits


def test_spilling_kernels_keep_long_nests_as_loops_on_cuda():
    """16 KiB of arrays a thread (a 4 MiB fragment over 256 threads) is within CUDA's budget;
    fully unrolled, NVRTC took over a minute on it. Past the registers the arrays live in
    local memory anyway: nests of more than 256 copies stay loops, and it compiles in
    seconds. Kernels within the registers are unrolled as before."""
    import time
    target = "cuda -arch=sm_90a"
    spilling = _C.codegen(_C.lower(_fragment(1024, 1024, threads=256).handle, target), target)
    assert "#pragma unroll 1" in spilling
    fits = _C.codegen(_C.lower(_fragment(128, 128).handle, target), target)
    assert "#pragma unroll 1" not in fits and "#pragma unroll" in fits
    try:
        _C.nvrtc_id()
    except Exception as e:  # noqa: BLE001 - the library is missing or unusable
        pytest.skip(f"NVRTC is not available: {str(e).splitlines()[0]}")
    from tilelang.jit.kernel import _include_dir
    start = time.monotonic()
    assert _C.nvrtc_compile(spilling, "spill.cu", "sm_90a", [_include_dir()])[:4] == b"\x7fELF"
    assert time.monotonic() - start < 30


def _accumulated(rows, cols, steps=4, threads=128):
    """F (rows x cols floats) stays alive across a loop that adds a slice of A into it."""

    @T.prim_func
    def main(A: T.Tensor((steps, rows, cols), "float32"), B: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1, threads=threads) as bx:  # noqa: F841
            F = T.alloc_fragment((rows, cols), "float32")
            T.clear(F)
            for k in T.serial(steps):
                for i, j in T.Parallel(rows, cols):
                    F[i, j] += A[k, i, j] * F[i, j]
            T.copy(F, B)

    return main


def _one_after_another(rows, cols, threads=128):
    """Two fragments, one alive after the other: together past the registers, never at once."""

    @T.prim_func
    def main(A: T.Tensor((rows, cols), "float32"), B: T.Tensor((rows, cols), "float32"),
             C: T.Tensor((rows, cols), "float32"), D: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1, threads=threads) as bx:  # noqa: F841
            F1 = T.alloc_fragment((rows, cols), "float32")
            F2 = T.alloc_fragment((rows, cols), "float32")
            T.copy(A, F1)
            T.copy(F1, B)
            T.copy(C, F2)
            T.copy(F2, D)

    return main


def _report_after_ptxas(func):
    """The report a CUDA kernel gets once NVRTC has compiled it (what ptxas spilled)."""
    try:
        _C.nvrtc_id()
    except Exception as e:  # noqa: BLE001 - the library is missing or unusable
        pytest.skip(f"NVRTC is not available: {str(e).splitlines()[0]}")
    from tilelang.jit.backends import with_ptxas_spills
    from tilelang.jit.kernel import _include_dir
    target = "cuda -arch=sm_90a"
    lowered = _C.lower(func.handle, target)
    _, log = _C.nvrtc_compile(_C.codegen(lowered, target), "k.cu", "sm_90a", [_include_dir()], False, True)
    return lowered.lowering_report(), with_ptxas_spills(lowered.lowering_report(), log, "k.py:1")


def test_what_ptxas_spilled_replaces_the_estimate():
    """2 KiB of floats a thread alive across a loop: the estimate said so, ptxas keeps them in
    local memory and says how much; the report names ptxas' figures instead of the estimate."""
    estimate, report = _report_after_ptxas(_accumulated(256, 256))
    assert "each thread holds 2048 bytes of arrays [slower path" in estimate
    assert "each thread holds" not in report
    assert re.search(r"k\.py:1: ptxas keeps [1-9]\d* bytes of each thread of main_kernel in local memory "
                     r"\(\d+ bytes of spill stores, \d+ of spill loads\) \[slower path:", report), report


def test_an_estimate_ptxas_does_not_confirm_is_dropped():
    """Arrays that are never alive together (two 512-byte fragments, one after the other) fit
    in registers after all: no slower path is named."""
    estimate, report = _report_after_ptxas(_one_after_another(128, 128))
    assert "each thread holds 1024 bytes" in estimate
    assert "each thread holds" not in report and "local memory" not in report, report


def test_ptxas_resource_lines_are_read_per_kernel():
    from tilelang.jit.backends import ptxas_local_memory
    log = ("ptxas info    : Function properties for a_kernel\n"
           "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
           "ptxas info    : Function properties for b_kernel\n"
           "ptxas         .     40 bytes stack frame, 36 bytes spill stores, 28 bytes spill loads\n")
    assert ptxas_local_memory(log) == {"a_kernel": (0, 0, 0), "b_kernel": (40, 36, 28)}
    assert ptxas_local_memory("") == {}
