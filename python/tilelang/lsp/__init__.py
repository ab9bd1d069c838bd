"""The TileLang language server: `tilelang-lsp` or `python -m tilelang.lsp` (needs pygls:
pip install 'tilelang[lsp]'). See tilelang.lsp.server."""
