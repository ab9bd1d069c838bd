"""What one thread holds must fit the GPU targets: past 16 KiB of per-thread arrays the
kernel is a compile error at the allocation (compilers and drivers take minutes or hang on
such kernels); on CUDA, past the 255 registers a thread has, the report names the spill."""
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


@pytest.mark.parametrize("target", GPU_TARGETS)
def test_a_huge_fragment_is_rejected_at_its_line(target):
    with pytest.raises(TileLangUnsupportedError, match=r"each thread would hold 32768 bytes of per-thread arrays "
                                                      r"\('F' adds 32768\); the target allows 16384") as e:
        _C.lower(_fragment(1024, 1024).handle, target)
    assert "T.alloc_fragment((rows, cols)" in str(e.value)


@pytest.mark.parametrize("target", GPU_TARGETS)
def test_a_huge_local_array_is_rejected(target):
    with pytest.raises(TileLangUnsupportedError, match=r"'L' adds 4000000"):
        _C.lower(_local(1000000).handle, target)


def test_spills_are_a_named_slower_path_on_cuda():
    report = _C.lower(_fragment(256, 256).handle, "cuda -arch=sm_90a").lowering_report()  # 2 KiB a thread
    assert "each thread holds 2048 bytes of arrays [slower path: more than the 255 registers" in report
    fits = _C.lower(_fragment(128, 128).handle, "cuda -arch=sm_90a").lowering_report()  # 512 bytes
    assert "each thread holds" not in fits
