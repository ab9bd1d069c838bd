"""The language server (tilelang-lsp), driven over stdio by pygls's own LSP client: the
compiler's diagnostics of a broken kernel file (ranges, messages, kinds) on open and
again on save, hover documentation, completion of T.* names and of their arguments, and
signature help."""
import asyncio
import inspect
import sys
import textwrap

import pytest

pytest.importorskip("pygls", reason="pygls is not installed (pip install 'tilelang[lsp]')")

from lsprotocol import types  # noqa: E402
from pygls.lsp.client import LanguageClient  # noqa: E402

import tilelang.language as T  # noqa: E402

# Three independent mistakes, each found by the compiler: a shape mismatch (a factory
# called at module level), an out-of-bounds region (a @tilelang.jit factory with default
# arguments, lowered by the server) and an undefined name (a module-level kernel).
BROKEN = textwrap.dedent('''\
    import tilelang
    import tilelang.language as T


    def copy_kernel(M=32):
        @T.prim_func
        def copy_shapes(A: T.Tensor((M, 16), "float32"), B: T.Tensor((M, 8), "float32")):
            with T.Kernel(1, threads=128) as bx:
                S = T.alloc_shared((M, 16), "float32")
                F = T.alloc_fragment((M, 8), "float32")
                T.copy(A, S)
                T.copy(S, F)
                T.copy(F, B)

        return copy_shapes


    shapes = copy_kernel()


    @tilelang.jit(out_idx=[1])
    def window(N=128):
        @T.prim_func
        def out_of_bounds(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                S = T.alloc_shared((N,), "float32")
                T.copy(A, S)
                T.copy(S[64:192], B[0:128])

        return out_of_bounds


    @T.prim_func
    def unknown(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            A[0] = undefined_value + 1.0
    ''')

# (start, end, code, the message's first line): positions are 0-based (line, character).
EXPECTED = [
    ((11, 12), (11, 24), "TileLangShapeError",
     "T.copy: shape mismatch between S (extents 32 x 16) and F (extents 32 x 8)"),
    ((27, 12), (27, 39), "TileLangBoundsError",
     "T.copy: region S[64:192] is out of bounds in dimension 0 of S (shape 128): range [64, 192) is not inside "
     "[0, 128)"),
    ((35, 8), (35, 36), "TileLangNameError", "name 'undefined_value' is not defined"),
]


def _fixed(source):
    return (source.replace('T.Tensor((M, 8), "float32")', 'T.Tensor((M, 16), "float32")')
            .replace('T.alloc_fragment((M, 8)', 'T.alloc_fragment((M, 16)')
            .replace("S[64:192], B[0:128]", "S, B").replace("undefined_value", "A[1]"))


class _Session:
    """A client connected to `python -m tilelang.lsp`, collecting published diagnostics."""

    def __init__(self):
        self.client = LanguageClient("tilelang-test-client", "1")
        self.published = asyncio.Queue()

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def publish(params):
            self.published.put_nowait(params)

    async def start(self, root):
        await self.client.start_io(sys.executable, "-m", "tilelang.lsp")
        await self.client.initialize_async(types.InitializeParams(
            capabilities=types.ClientCapabilities(), root_uri=root.as_uri(),
            initialization_options={"target": "cuda -arch=sm_90a", "timeout": 120}))
        self.client.initialized(types.InitializedParams())

    async def diagnostics(self, uri):
        while True:
            params = await asyncio.wait_for(self.published.get(), 150)
            if params.uri == uri:
                return params.diagnostics

    async def stop(self):
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


def _doc(uri):
    return types.TextDocumentIdentifier(uri=uri)


def _pos(line, character):
    return types.Position(line=line, character=character)


def test_language_server_over_stdio(tmp_path):
    path = tmp_path / "broken_kernels.py"
    path.write_text(BROKEN)
    uri = path.as_uri()

    async def session():
        s = _Session()
        await s.start(tmp_path)
        try:
            s.client.text_document_did_open(types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=BROKEN)))
            opened = await s.diagnostics(uri)
            hover = await s.client.text_document_hover_async(types.HoverParams(_doc(uri), _pos(11, 15)))
            names = await s.client.text_document_completion_async(types.CompletionParams(_doc(uri), _pos(8, 21)))
            line = BROKEN.splitlines()[10]
            args = await s.client.text_document_completion_async(
                types.CompletionParams(_doc(uri), _pos(10, line.index("(") + 1)))
            signature = await s.client.text_document_signature_help_async(
                types.SignatureHelpParams(_doc(uri), _pos(10, line.index(",") + 2)))
            # Fixed and saved: the diagnostics are published again, now none.
            path.write_text(_fixed(BROKEN))
            s.client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=_fixed(BROKEN))]))
            s.client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=_doc(uri)))
            saved = await s.diagnostics(uri)
        finally:
            await s.stop()
        return opened, hover, names, args, signature, saved

    opened, hover, names, args, signature, saved = asyncio.run(session())

    print("\ndiagnostics of the broken file:")
    for d in opened:
        print(f"  {d.range.start.line}:{d.range.start.character}-{d.range.end.line}:{d.range.end.character} "
              f"[{d.code}] {d.message!r}")
    got = [((d.range.start.line, d.range.start.character), (d.range.end.line, d.range.end.character), d.code,
            d.message.splitlines()[0]) for d in opened]
    assert got == EXPECTED
    assert all(d.severity == types.DiagnosticSeverity.Error and d.source == "tilelang" for d in opened)
    assert opened[0].message.splitlines()[1].startswith("hint: both tiles must have the same extents")
    assert list(saved) == []

    # Hover on `copy` of T.copy: its signature and docstring.
    assert hover.contents.kind == types.MarkupKind.Markdown
    assert f"T.copy{inspect.signature(T.copy)}" in hover.contents.value
    assert inspect.getdoc(T.copy) in hover.contents.value
    assert (hover.range.start.character, hover.range.end.character) == (12, 18)

    # `T.all` (the cursor inside `T.alloc_shared`) completes to every T.all* name, documented.
    labels = sorted(item.label for item in names.items)
    assert labels == sorted(n for n in dir(T) if n.startswith("all") and not inspect.ismodule(getattr(T, n)))
    assert "alloc_fragment" in labels
    shared = next(item for item in names.items if item.label == "alloc_shared")
    assert inspect.getdoc(T.alloc_shared) in shared.documentation.value

    # Inside T.copy( : its arguments; after the first comma, the second is active.
    assert [item.label for item in args.items] == [f"{p}=" for p in inspect.signature(T.copy).parameters]
    assert signature.signatures[0].label == f"T.copy{inspect.signature(T.copy)}"
    assert signature.active_parameter == 1


def test_checker_reports_python_syntax_errors_and_slower_paths(tmp_path):
    import tilelang
    from tilelang.lsp.check import check
    compile_before = tilelang.compile
    bad = "import tilelang.language as T\n\ndef f(:\n    pass\n"
    (d,) = check(str(tmp_path / "syntax.py"), bad, "cuda -arch=sm_90a")
    assert (d["start"], d["code"], d["message"]) == ((2, 6), "SyntaxError", "SyntaxError: invalid syntax")
    # A gemm whose operands keep it off wgmma on sm_90a is reported as a warning at its line.
    slow = textwrap.dedent('''\
        import tilelang
        import tilelang.language as T

        @T.prim_func
        def mm(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"),
               C: T.Tensor((128, 128), "float32")):
            with T.Kernel(1, threads=128) as bx:
                A_s = T.alloc_shared((128, 64), "float16")
                B_s = T.alloc_shared((64, 128), "float16")
                C_l = T.alloc_fragment((128, 128), "float32")
                T.copy(A, A_s)
                T.copy(B, B_s)
                T.gemm(A_s, B_s, C_l)
                T.copy(C_l, C)

        kernel = tilelang.compile(mm, target="cuda", pass_configs={"tl.disable_wgmma": True})
        kernel(None)  # not run while checking
        ''')
    found = check(str(tmp_path / "slow.py"), slow, "cuda -arch=sm_90a")
    assert [(d["start"][0], d["code"], d["severity"]) for d in found] == [(12, "TileLangPerformanceWarning", 2)]
    assert "[slower path:" in found[0]["message"]
    assert tilelang.compile is compile_before  # checking in this process left it as it was


def test_every_language_name_has_hover_documentation():
    import types as pytypes
    from tilelang.lsp.names import language_names
    names = language_names()
    public = {n for n in dir(T) if not n.startswith("_") and n != "annotations"
              and not isinstance(getattr(T, n), pytypes.ModuleType)}
    assert set(names) == public
    for name, entry in names.items():
        obj = getattr(T, name)
        assert entry.doc.strip(), f"T.{name} has no docstring"
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert inspect.getdoc(obj) in entry.markdown(), name
