"""Shared pytest configuration for the Python kernel tests.

Every kernel test takes the ``target`` fixture, so the same cases run on each
back end listed in ``TARGETS``. To enable a new back end, append its target
string to ``TARGETS`` (and, if it needs hardware, register a probe in
``_PROBES``). The list can be overridden for one run with the environment
variable ``TILELANG_TEST_TARGETS``, e.g.::

    TILELANG_TEST_TARGETS=cpu,cuda python -m pytest tests/python

A target whose hardware is not present is skipped with the reason.
"""

import os
import sys

import numpy as np
import pytest

# torch.compile imports triton, whose bundled LLVM crashes the process when it is loaded
# after Mesa's lavapipe (the webgpu target on the CPU) has loaded the system's LLVM; loaded
# first, both work. So triton, when installed, is imported before any test runs.
try:
    import triton  # noqa: F401
except Exception:  # not installed (or unusable here): torch then compiles without it
    pass

# Make the kernel-builder package (tests/python/kernels) importable whatever
# import mode pytest runs in.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

# The back ends the suite runs on by default. Add a target here once its back
# end can run kernels. webgpu runs wherever an adapter exists (Mesa's lavapipe in CI)
# and is skipped, with the reason, elsewhere.
TARGETS = ["cpu", "webgpu"]

# Targets that need an accelerator; their test ids are marked ``gpu``.
_GPU_TARGETS = {"cuda", "hip", "rocm", "metal"}


def selected_targets():
    """Targets for this run: TILELANG_TEST_TARGETS if set, else TARGETS."""
    env = os.environ.get("TILELANG_TEST_TARGETS", "").strip()
    if env:
        return [t.strip() for t in env.split(",") if t.strip()]
    return list(TARGETS)


def _probe_cpu():
    return None


def _probe_cuda():
    import tilelang

    probe = getattr(tilelang, "cuda_available", None)
    if probe is None:
        return ("tilelang.cuda_available() does not exist, so the presence of a "
                "CUDA GPU cannot be detected")
    if not probe():
        return "no CUDA GPU detected (tilelang.cuda_available() returned False)"
    return None


# target name -> function returning None when the target can run here, or a
# string saying why it cannot.
_WEBGPU_SMOKE = """
import numpy as np, tilelang, tilelang.language as T
@T.prim_func
def smoke(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
    with T.Kernel(2, threads=128) as bx:
        for i in T.Parallel(128):
            B[bx * 128 + i] = A[bx * 128 + i] * 2.0
k = tilelang.compile(smoke, out_idx=[1], target="webgpu")
a = np.arange(256, dtype=np.float32)
assert (k(a) == 2 * a).all()
"""


def _probe_webgpu():
    from tilelang.jit import webgpu
    reason = webgpu.unavailable_reason()
    if reason:
        return reason
    # A driver that crashes the process would take the whole run with it: try a tiny kernel
    # in a child process first.
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "webgpu_smoke.py")  # kernels are parsed from their source file
        with open(script, "w") as f:
            f.write(_WEBGPU_SMOKE)
        try:
            r = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=120,
                               env=dict(os.environ, TILELANG_DISABLE_CACHE="1"))
        except subprocess.TimeoutExpired:
            return "a tiny webgpu kernel did not finish in 120 s on this adapter"
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return f"a tiny webgpu kernel failed on this adapter (exit code {r.returncode}: {tail})"
    return None


_PROBES = {
    "cpu": _probe_cpu,
    "cuda": _probe_cuda,
    "webgpu": _probe_webgpu,
}


_PROBED = {}


def target_unavailable_reason(name):
    """None when kernels for ``name`` can run on this machine, else why not (probed once)."""
    if name in _PROBED:
        return _PROBED[name]
    _PROBED[name] = _probe_target(name)
    return _PROBED[name]


def _probe_target(name):
    probe = _PROBES.get(name)
    if probe is None:
        return (f"no hardware probe is registered for target {name!r} "
                "(add one to _PROBES in tests/python/conftest.py)")
    return probe()


def _target_params():
    params = []
    for name in selected_targets():
        marks = [pytest.mark.gpu] if name in _GPU_TARGETS else []
        params.append(pytest.param(name, id=name, marks=marks))
    return params


@pytest.fixture(params=_target_params())
def target(request):
    """The target string passed to tilelang.compile / tilelang.jit."""
    name = request.param
    reason = target_unavailable_reason(name)
    if reason is not None:
        pytest.skip(f"target {name!r} not available: {reason}")
    return name


@pytest.fixture
def rng():
    """A fresh, fixed-seed random generator for each test."""
    return np.random.default_rng(0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On webgpu, a kernel the back end rejects with "not supported on webgpu: ..." (a clear
    compile-time error, never a wrong answer) is reported as skipped with that reason, so
    the summary lists what the target cannot run."""
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or call.excinfo is None:
        return
    from tilelang.errors import TileLangUnsupportedError
    err = call.excinfo.value
    callspec = getattr(item, "callspec", None)
    on_webgpu = callspec is not None and callspec.params.get("target") == "webgpu"
    if on_webgpu and isinstance(err, TileLangUnsupportedError) and "not supported on webgpu" in str(err):
        reason = str(err).split("not supported on webgpu: ", 1)[1].splitlines()[0]
        report.outcome = "skipped"
        report.longrepr = (str(item.fspath), item.location[1] or 0, f"Skipped: not supported on webgpu: {reason}")


@pytest.fixture(autouse=True)
def _forced_switches(monkeypatch):
    """TILELANG_TEST_SWITCHES=tl.disable_tma_lower,tl.disable_warp_specialized runs every
    kernel that tilelang.compile builds with those switch pass configs set too (the GPU
    suites are run once so, to check the paths without TMA or warp specialisation). Tests
    that lower with switches of their own are not affected."""
    forced = [s for s in os.environ.get("TILELANG_TEST_SWITCHES", "").split(",") if s]
    if not forced:
        return
    from tilelang.jit import backends
    plain = backends.switches
    monkeypatch.setattr(backends, "switches", lambda pass_configs: sorted(set(plain(pass_configs)) | set(forced)))
