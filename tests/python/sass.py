"""Machine code of kernels compiled for sm_90a without a GPU: NVRTC in process, then
cuobjdump (and the nvdisasm it calls) from the CUDA toolkit or the pip wheels."""
import os
import shutil
import subprocess
import sysconfig
import tempfile

import pytest

from tilelang import _C
from tilelang.jit.kernel import _include_dir


def nvrtc_reason():
    """None when NVRTC loads, else why not."""
    try:
        _C.nvrtc_id()
        return None
    except Exception as e:  # the library is missing or unusable
        return str(e).splitlines()[0]


def cuobjdump():
    """(cuobjdump path or None, the search path to run it with)."""
    wheel_bin = os.path.join(sysconfig.get_paths()["purelib"], "nvidia", "cu13", "bin")
    path = os.pathsep.join([wheel_bin, os.environ.get("PATH", "")])
    tool = shutil.which("cuobjdump", path=path)
    return (tool if tool and shutil.which("nvdisasm", path=path) else None), path


def sass_of(func, switches=(), arch="sm_90a", fast_math=False):
    """(SASS, resource usage, lowering report) of func lowered with the given switch pass
    configs and compiled by NVRTC; skips the test when NVRTC or cuobjdump is missing."""
    reason = nvrtc_reason()
    if reason:
        pytest.skip(f"NVRTC is not available: {reason}")
    tool, path = cuobjdump()
    if not tool:
        pytest.skip("cuobjdump/nvdisasm not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
    target = f"cuda -arch={arch}"
    lowered = _C.lower(func.handle, target, list(switches))
    cubin = _C.nvrtc_compile(_C.codegen(lowered, target), "kernel.cu", arch, [_include_dir()], fast_math)
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, "kernel.cubin")
        with open(f, "wb") as out:
            out.write(cubin)
        env = dict(os.environ, PATH=path)

        def run(*flags):
            return subprocess.run([tool, *flags, f], capture_output=True, text=True, env=env, check=True).stdout

        return run("-sass"), run("-res-usage"), lowered.lowering_report()
