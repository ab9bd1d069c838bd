"""The TileLang language server (pygls): the compiler's diagnostics on open and save, hover
documentation, completion and signature help for the kernel language's names.

Configuration (initializationOptions, or the TILELANG_LSP_TARGET environment variable)::

    {"target": "cuda -arch=sm_90a", "timeout": 60}

target: what kernels are lowered for (a bare "cuda" or "auto" in the file means this one);
timeout: how long one file may take to check, in seconds.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import sys

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from .names import language_names

DEFAULT_TARGET = "cuda -arch=sm_90a"
DEFAULT_TIMEOUT = 60.0

server = LanguageServer("tilelang-lsp", "0.1.0")
_settings = {"target": os.environ.get("TILELANG_LSP_TARGET", DEFAULT_TARGET), "timeout": DEFAULT_TIMEOUT}
_checks = {}  # uri -> the task checking it


# ---------------------------------------------------------------------------- diagnostics

async def _run_check(path, source):
    request = json.dumps({"path": path, "source": source, "target": _settings["target"]}).encode()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tilelang.lsp.check", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        cwd=os.path.dirname(path) or None)
    try:
        out, err = await asyncio.wait_for(proc.communicate(request), _settings["timeout"])
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        return [{"start": (0, 0), "end": (0, 0), "severity": 3, "code": "timeout",
                 "message": f"tilelang: checking this file took longer than {_settings['timeout']:g} s; "
                            "no diagnostics (does its module-level code run something long?)"}]
    if proc.returncode != 0:
        tail = (err.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        return [{"start": (0, 0), "end": (0, 0), "severity": 1, "code": "checker",
                 "message": f"tilelang: the checker stopped (exit code {proc.returncode}): {tail}"}]
    return json.loads(out)


def _diagnostic(d):
    return types.Diagnostic(
        range=types.Range(start=types.Position(*d["start"]), end=types.Position(*d["end"])),
        message=d["message"], severity=types.DiagnosticSeverity(d["severity"]), code=d["code"], source="tilelang")


async def _check(ls, uri):
    doc = ls.workspace.get_text_document(uri)
    found = await _run_check(doc.path, doc.source)
    ls.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=uri, version=doc.version, diagnostics=[_diagnostic(d) for d in found]))


def _schedule(ls, uri):
    previous = _checks.get(uri)
    if previous is not None and not previous.done():
        previous.cancel()  # an older text: its diagnostics would be stale
    _checks[uri] = asyncio.get_running_loop().create_task(_check(ls, uri))


@server.feature(types.INITIALIZE)
def initialize(ls, params: types.InitializeParams):
    options = params.initialization_options or {}
    if isinstance(options, dict):
        if options.get("target"):
            _settings["target"] = str(options["target"])
        if options.get("timeout"):
            _settings["timeout"] = float(options["timeout"])


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
async def did_open(ls, params: types.DidOpenTextDocumentParams):
    _schedule(ls, params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
async def did_save(ls, params: types.DidSaveTextDocumentParams):
    _schedule(ls, params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls, params: types.DidCloseTextDocumentParams):
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))


# ---------------------------------------------------------------------------- names

def _alias(source):
    """The names the file gives tilelang.language (T by default)."""
    found = re.findall(r"^\s*import\s+tilelang\.language\s+as\s+(\w+)", source, re.M)
    found += re.findall(r"^\s*from\s+tilelang\s+import\s+language\s+as\s+(\w+)", source, re.M)
    return set(found) or {"T"}


def _line(doc, position):
    lines = doc.lines
    return lines[position.line].rstrip("\r\n") if position.line < len(lines) else ""


def _name_at(doc, position):
    """The T.* name under the cursor, or None."""
    line = _line(doc, position)
    for m in re.finditer(r"\b(\w+)\.(\w+)\b", line):
        if m.start() <= position.character <= m.end() and m.group(1) in _alias(doc.source):
            return m.group(2), m.start(), m.end()
    return None


def _call_at(doc, position):
    """(T.* name, index of the argument) of the innermost call the cursor is inside."""
    lines = list(doc.lines[:position.line]) + [_line(doc, position)[:position.character]]
    text = "".join(lines[:-1]) + lines[-1]
    depth, commas = 0, 0
    for k in range(len(text) - 1, -1, -1):
        ch = text[k]
        if ch in ")]}":
            depth += 1
        elif ch in "([{":
            if depth == 0:
                if ch != "(":
                    return None
                m = re.search(r"\b(\w+)\.(\w+)\s*$", text[:k])
                if m and m.group(1) in _alias(doc.source):
                    return m.group(2), commas
                return None
            depth -= 1
        elif ch == "," and depth == 0:
            commas += 1
    return None


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(ls, params: types.HoverParams):
    doc = ls.workspace.get_text_document(params.text_document.uri)
    found = _name_at(doc, params.position)
    if found is None or found[0] not in language_names():
        return None
    name, start, end = found
    return types.Hover(
        contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=language_names()[name].markdown()),
        range=types.Range(start=types.Position(params.position.line, start),
                          end=types.Position(params.position.line, end)))


_KINDS = {"function": types.CompletionItemKind.Function, "class": types.CompletionItemKind.Class,
          "dtype": types.CompletionItemKind.Constant, "value": types.CompletionItemKind.Variable}


@server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[".", "(", ","]))
def completion(ls, params: types.CompletionParams):
    doc = ls.workspace.get_text_document(params.text_document.uri)
    before = _line(doc, params.position)[:params.position.character]
    m = re.search(r"\b(\w+)\.(\w*)$", before)
    if m and m.group(1) in _alias(doc.source):
        items = [types.CompletionItem(label=n.name, kind=_KINDS[n.kind], detail=n.signature or None,
                                      documentation=types.MarkupContent(kind=types.MarkupKind.Markdown,
                                                                        value=n.markdown()))
                 for n in language_names().values() if n.name.startswith(m.group(2))]
        return types.CompletionList(is_incomplete=False, items=items)
    call = _call_at(doc, params.position)
    if call is not None and call[0] in language_names():
        n = language_names()[call[0]]
        items = [types.CompletionItem(label=f"{p}=", kind=types.CompletionItemKind.Variable, detail=shown,
                                      insert_text=f"{p}=", sort_text=f"{k:03d}")
                 for k, (p, shown) in enumerate(n.parameters)]
        return types.CompletionList(is_incomplete=False, items=items)
    return None


@server.feature(types.TEXT_DOCUMENT_SIGNATURE_HELP, types.SignatureHelpOptions(trigger_characters=["(", ","]))
def signature_help(ls, params: types.SignatureHelpParams):
    doc = ls.workspace.get_text_document(params.text_document.uri)
    call = _call_at(doc, params.position)
    if call is None or call[0] not in language_names():
        return None
    n = language_names()[call[0]]
    signature = types.SignatureInformation(
        label=f"T.{n.name}{n.signature}", documentation=types.MarkupContent(kind=types.MarkupKind.Markdown, value=n.doc),
        parameters=[types.ParameterInformation(label=shown) for _, shown in n.parameters])
    return types.SignatureHelp(signatures=[signature], active_signature=0,
                               active_parameter=min(call[1], max(len(n.parameters) - 1, 0)))


def main():
    """The tilelang-lsp command: the server on stdin / stdout."""
    server.start_io()


if __name__ == "__main__":
    main()
