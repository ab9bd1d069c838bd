"""The API reference (docs/api, Sphinx autodoc) builds from the docstrings with every
warning an error, and documents the kernel language's names."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("sphinx", reason="Sphinx is not installed (pip install 'tilelang[docs]')")

import tilelang.language as T  # noqa: E402

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "api")


def test_api_reference_builds_without_warnings(tmp_path):
    out = tmp_path / "html"
    r = subprocess.run([sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-q", "-b", "html", DOCS,
                        str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    language = (out / "language.html").read_text()
    for name in ("copy", "gemm", "Kernel", "Pipelined", "alloc_shared", "reduce_max"):
        assert f'id="tilelang.language.{name}"' in language, name
    # The docstring's text is there (the first words of T.copy's).
    assert " ".join(T.copy.__doc__.split()[:4]) in " ".join(language.split())
    assert 'id="tilelang.jit.kernel.JITKernel.torch_op"' in (out / "compile.html").read_text()
    assert "plot_layout" in (out / "tools.html").read_text()
