"""pytest plugin for the GPU script: loads native_backtrace.so (NATIVE_BACKTRACE_LIB) and
installs its crash handler again before each test, and names the test in the log, so that
a process that dies inside the C++ core leaves its native stack and the test behind."""
import ctypes
import os

_lib = ctypes.CDLL(os.environ["NATIVE_BACKTRACE_LIB"])
_log = os.environ.get("NATIVE_BACKTRACE_LOG")


def pytest_runtest_setup(item):
    if _log:
        with open(_log, "a") as f:  # the last name before a crash is the test that died
            f.write(f"test: {item.nodeid}\n")
    _lib.native_backtrace_install()
