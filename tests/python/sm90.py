"""The Hopper suites' GPU gate: their numerics run on an sm_90 GPU under a CUDA target."""
import pytest

import tilelang
from tilelang import _C


def require_sm90(target):
    """Skips the test (with the reason) unless `target` is CUDA and an sm_90 GPU is here."""
    if not target.startswith("cuda"):
        pytest.skip("the Hopper path runs on CUDA targets only; cpu and webgpu run these kernels elsewhere")
    if not tilelang.cuda_available() or not _C.cuda_device_arch(0).startswith("sm_90"):
        pytest.skip("needs an sm_90 GPU (H100/H200)")


def hopper_path_forced_off():
    """Whether this run forces switch pass configs that take the TMA / warp-specialised
    path away (TILELANG_TEST_SWITCHES, see conftest.py): the GPU tests then check numerics
    only, not the report lines of that path."""
    import os
    forced = os.environ.get("TILELANG_TEST_SWITCHES", "")
    return any(s in forced for s in ("tl.disable_tma_lower", "tl.disable_warp_specialized", "tl.disable_wgmma"))
