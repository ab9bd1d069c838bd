"""Runs invalid-program cases for one target, one after another, in a process of its own
(the parent, runner.py, restarts it after a crash or a hang).

Protocol: one JSON request per line on stdin ({"name", "source", "stage"}); one JSON reply
per line on the protocol stream ({"raised": class names of the exception's MRO or [],
"file", "line", "message"}). Kernels and the compiler may print: the protocol stream is the
original stdout, and everything else goes to stderr.

Each case is written to a file of its own (kernels are parsed from their source) and run
with these names defined: np, tilelang, T, TARGET and compile(func, **options), which is
tilelang.compile for TARGET. For "cuda-compile" (no GPU on this machine) compile runs the
whole path up to loading the cubin (lowering, code generation, NVRTC) and returns a
kernel that cannot be called; cases of stage "call" are not run there.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback


def _protocol_stream():
    """The original stdout for replies; fd 1 (C and Python prints) goes to stderr."""
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", buffering=1)


class _UnloadedCuda:
    """What CudaBackend.build returns here in place of a loaded module."""

    def __init__(self, infos, cubin, source, report, params):
        self.source, self.report = source, report

    def lowering_report(self):
        return self.report

    def run(self, *args, **kwargs):
        raise RuntimeError("cuda-compile: the kernel was compiled but there is no device to run it")


def _compile_for(target):
    import tilelang
    if target == "cuda-compile":
        from tilelang.jit import backends
        backends.CudaExecutable = _UnloadedCuda
        target = "cuda -arch=sm_90a"

    def compile(func, **options):  # noqa: A001 - the name the cases use
        options.setdefault("target", target)
        return tilelang.compile(func, **options)

    return compile


def _where(err, path):
    """The file and line an error names: a TileLangError's own location, else the last
    frame of the traceback in the case's file (where a call or compile was made)."""
    from tilelang.errors import TileLangError
    if isinstance(err, TileLangError):
        return err.file, err.line
    for frame in reversed(traceback.extract_tb(err.__traceback__)):
        if os.path.abspath(frame.filename) == path:
            return frame.filename, frame.lineno
    return None, None


def main():
    target = sys.argv[1]
    out = _protocol_stream()
    import numpy as np
    import tilelang
    import tilelang.language as T
    compile_fn = _compile_for(target)
    workdir = tempfile.mkdtemp(prefix="tilelang-corpus-")
    for request in sys.stdin:
        case = json.loads(request)
        path = os.path.join(workdir, f"{case['name']}.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(case["source"])
        reply = {"raised": [], "file": None, "line": None, "message": ""}
        env = {"__name__": "__corpus__", "__file__": path, "np": np, "tilelang": tilelang, "T": T,
               "TARGET": target, "compile": compile_fn}
        try:
            code = compile(case["source"], path, "exec")  # Python's built-in compile
            exec(code, env)
        except BaseException as e:  # noqa: BLE001 - every outcome is reported
            file, line = _where(e, os.path.abspath(path))
            reply = {"raised": [c.__name__ for c in type(e).__mro__], "file": file, "line": line,
                     "message": str(e)[:2000]}
        out.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
