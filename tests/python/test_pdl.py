"""T.pdl_trigger / T.pdl_sync (programmatic dependent launch): a kernel that waits by
T.pdl_sync is launched with programmatic stream serialization and reads what the previous
kernel wrote; griddepcontrol on sm_90, nothing before it, nothing on the other targets."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _C


def producer(n=4096):
    @T.prim_func
    def double(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(n // 256, threads=256) as bx:
            for i in T.Parallel(256):
                B[bx * 256 + i] = A[bx * 256 + i] * 2
            T.pdl_trigger()

    return double


def consumer(n=4096):
    @T.prim_func
    def add_one(B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(n // 256, threads=256) as bx:
            T.pdl_sync()
            for i in T.Parallel(256):
                C[bx * 256 + i] = B[bx * 256 + i] + 1

    return add_one


def test_dependent_kernels(target, rng):
    first = tilelang.compile(producer(), target=target)
    second = tilelang.compile(consumer(), target=target)
    for _ in range(3):  # back to back on one stream: the second waits for the first's writes
        a = rng.standard_normal(4096).astype(np.float32)
        if target == "cuda":
            import torch
            a_t, b_t, c_t = torch.from_numpy(a).cuda(), torch.empty(4096, device="cuda"), torch.empty(4096, device="cuda")
            first(a_t, b_t)
            second(b_t, c_t)
            c = c_t.cpu().numpy()
        else:
            b, c = np.zeros_like(a), np.zeros_like(a)
            first(a, b)
            second(b, c)
        np.testing.assert_array_equal(c, a * 2 + 1)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_source_and_launch_flag(arch):
    target = f"cuda -arch={arch}"
    lowered = _C.lower(consumer().handle, target)
    source = _C.codegen(lowered, target)
    assert "tl::pdl_sync();" in source
    assert [i["programmatic_launch"] for i in _C.cuda_kernel_infos(lowered)] == [True]
    assert [i["programmatic_launch"] for i in _C.cuda_kernel_infos(_C.lower(producer().handle, target))] == [False]
    from sass import nvrtc_reason, sass_of
    if nvrtc_reason():
        pytest.skip(f"NVRTC is not available: {nvrtc_reason()}")
    from tilelang.jit.kernel import _include_dir
    assert _C.nvrtc_compile(source, "pdl.cu", arch.rstrip("a") if arch == "sm_80" else arch, [_include_dir()])[:4] \
        == b"\x7fELF"
    if arch == "sm_90a":
        # griddepcontrol.wait / launch_dependents in the machine code (ACQBULK / PREEXIT on sm_90).
        sass, _, _ = sass_of(consumer())
        sass_trigger, _, _ = sass_of(producer())
        assert "ACQBULK" in sass, sass
        assert "PREEXIT" in sass_trigger, sass_trigger
