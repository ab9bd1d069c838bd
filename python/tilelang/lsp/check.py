"""Diagnostics of one Python file from the compiler itself, for the language server.

Runs in a process of its own (python -m tilelang.lsp.check, a JSON request on stdin, the
diagnostics as JSON on stdout), so that a file's module-level code, a hang or a crash
never reaches the server. The file is executed as a module not named "__main__" (its
`if __name__ == "__main__":` block does not run), with compilation replaced by lowering:
tilelang.compile and @tilelang.jit lower each kernel for the configured target, and
nothing is compiled to a binary or launched. Then every @T.prim_func the module defines,
and every @tilelang.jit factory whose parameters all have defaults, is lowered too.

A diagnostic is the compiler's typed error (parse, name, type, shape, bounds, layout,
unsupported) with its message and hint at the statement it names; a Python error raised
while the module runs, at the line of this file it came from; a "[slower path: ...]" of a
lowering report as a warning.
"""
from __future__ import annotations

import ast
import json
import linecache
import os
import re
import sys
import traceback

ERROR, WARNING = 1, 2  # LSP DiagnosticSeverity


class _NotRun(Exception):
    """A kernel was called while the file was checked: module-level code stops there."""


class _Checker:
    def __init__(self, path, source, target):
        self.path = os.path.abspath(path)
        self.source = source
        self.lines = source.splitlines()
        self.target = target
        self.tree = None
        self.diagnostics = []
        self.lowered = set()  # ids of the PrimFuncs already lowered

    # ------------------------------------------------------------------ ranges
    def _statement_at(self, line):
        best = None
        for node in ast.walk(self.tree) if self.tree is not None else ():
            if isinstance(node, ast.stmt) and node.lineno == line:
                if best is None or node.col_offset >= best.col_offset:
                    best = node
        return best

    def range_of(self, line, column=None):
        """The statement that starts at line (its header only, for a compound statement),
        else the text of the line."""
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        start = len(text) - len(text.lstrip())
        end = len(text.rstrip())
        node = self._statement_at(line)
        if node is not None and not hasattr(node, "body") and node.end_lineno is not None:
            return (line - 1, node.col_offset), (node.end_lineno - 1, node.end_col_offset)
        if node is not None:
            start = node.col_offset
        if column is not None and start <= column < end:
            start = column
        return (line - 1, start), (line - 1, max(end, start))

    def add(self, line, message, code, severity=ERROR, column=None, end=None):
        start, stop = self.range_of(line, column) if end is None else ((line - 1, column), end)
        d = {"start": start, "end": stop, "message": message, "code": code, "severity": severity}
        if d not in self.diagnostics:
            self.diagnostics.append(d)

    # ------------------------------------------------------------------ errors
    def _line_in_this_file(self, exc):
        for frame, lineno in reversed(list(traceback.walk_tb(exc.__traceback__))):
            if os.path.abspath(frame.f_code.co_filename) == self.path:
                return lineno
        return None

    def report(self, exc):
        from ..errors import TileLangError
        if isinstance(exc, _NotRun):
            return
        if isinstance(exc, TileLangError):
            line = exc.line if exc.file and os.path.abspath(exc.file) == self.path else None
            line = line or self._line_in_this_file(exc) or 1
            message = exc.message + (f"\nhint: {exc.hint}" if exc.hint else "")
            self.add(line, message, type(exc).__name__)
            return
        line = self._line_in_this_file(exc) or 1
        self.add(line, f"{type(exc).__name__}: {exc}", type(exc).__name__)

    def report_slower_paths(self, report):
        for text in report.splitlines():
            m = re.match(r"(.*):(\d+): (.*\[slower path: .*\])\s*$", text)
            if m and os.path.abspath(m.group(1)) == self.path:
                self.add(int(m.group(2)), m.group(3), "TileLangPerformanceWarning", WARNING)

    # ------------------------------------------------------------------ lowering
    def resolve(self, target):
        """The target a kernel is lowered for: the configured one for "auto" and for a
        bare "cuda" (whose architecture would come from a device)."""
        from .. import _C
        text = target if isinstance(target, str) else str(target)
        if text.strip() in ("auto", "cuda"):
            text = self.target
        return _C.normalise_target(text)

    def lower(self, func, target=None, pass_configs=None):
        from .. import _C
        from ..jit.backends import switches
        from ..jit.kernel import _check_pass_configs
        self.lowered.add(id(func))
        lowered = _C.lower(func.handle, self.resolve(target or "auto"), switches(_check_pass_configs(pass_configs)))
        self.report_slower_paths(lowered.lowering_report())

    def _lower_only(self, func, out_idx=None, target="auto", target_host=None, execution_backend="auto",
                    verbose=False, pass_configs=None, compile_flags=None):
        from ..ir import PrimFunc
        if not isinstance(func, PrimFunc):
            raise TypeError(f"tilelang.compile expects a @T.prim_func, got {type(func).__name__}")
        self.lower(func, target, pass_configs)
        return _Unbuilt(func)

    # ------------------------------------------------------------------ the file
    def run(self):
        try:
            code = compile(self.source, self.path, "exec")
            self.tree = ast.parse(self.source)
        except SyntaxError as e:
            line = e.lineno or 1
            column = (e.offset or 1) - 1
            end = ((e.end_lineno or line) - 1, max((e.end_offset or e.offset or 1) - 1, column + 1))
            self.add(line, f"SyntaxError: {e.msg}", "SyntaxError", column=column, end=end)
            return self.diagnostics
        # Kernels read their source through linecache: give it this text, saved or not.
        linecache.cache[self.path] = (len(self.source), None, self.source.splitlines(True), self.path)
        import tilelang
        # tilelang.jit is the decorator; its module (whose compile JITImpl calls) is here.
        jit_module = sys.modules["tilelang.jit"]
        saved = tilelang.compile, jit_module.compile, list(sys.path)
        tilelang.compile = jit_module.compile = self._lower_only
        sys.path.insert(0, os.path.dirname(self.path))
        namespace = {"__name__": "__tilelang_check__", "__file__": self.path, "__builtins__": __builtins__}
        try:
            try:
                exec(code, namespace)
            except SystemExit:
                pass
            except BaseException as e:  # noqa: BLE001 - every error of the user's module is a diagnostic
                if isinstance(e, KeyboardInterrupt):
                    raise
                self.report(e)
            self.lower_definitions(namespace)
        finally:
            # Checking in a process that goes on (tests, tools) leaves it as it was.
            tilelang.compile, jit_module.compile, sys.path[:] = saved[0], saved[1], saved[2]
            linecache.cache.pop(self.path, None)
        return self.diagnostics

    def lower_definitions(self, namespace):
        import inspect
        from ..ir import PrimFunc
        from ..jit import JITImpl
        for value in list(namespace.values()):
            try:
                if isinstance(value, PrimFunc) and id(value) not in self.lowered:
                    self.lower(value)
                elif isinstance(value, JITImpl) and value.signature is not None and all(
                        p.default is not inspect.Parameter.empty for p in value.signature.parameters.values()):
                    func = value.get_tir()
                    if id(func) not in self.lowered:
                        self.lower(func, value.target, value.pass_configs)
            except Exception as e:  # noqa: BLE001
                self.report(e)


class _Unbuilt:
    """What tilelang.compile returns while a file is checked: a lowered kernel that is never
    built, so calling it stops the module's code."""

    def __init__(self, func):
        self.prim_func = func

    def __call__(self, *args, **kwargs):
        raise _NotRun()

    def __getattr__(self, name):
        raise _NotRun()


def check(path, source, target):
    """The diagnostics of source (the text of the file at path) for target, as dicts with
    start / end ((line, character), 0-based), message, code and severity."""
    return sorted(_Checker(path, source, target).run(), key=lambda d: (tuple(d["start"]), d["message"]))


def main():
    request = json.load(sys.stdin)
    # The module's prints must not mix with the answer.
    out, sys.stdout = sys.stdout, sys.stderr
    try:
        diagnostics = check(request["path"], request["source"], request["target"])
    finally:
        sys.stdout = out
    json.dump(diagnostics, sys.stdout)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
