"""Sphinx configuration of the API reference (built from the docstrings).

    python -m sphinx -W -b html docs/api build/docs      (make docs)

tilelang must be importable (installed, or python/ on PYTHONPATH with the compiled core)."""
import tilelang

project = "TileLang"
release = version = tilelang.__version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.autosummary"]
autosummary_generate = False
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# Docstrings are plain prose with code in backquotes: show `x` as code, not as a reference.
default_role = "code"
exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path = []
