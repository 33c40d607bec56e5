"""`clawkb lsp`: a language server that brings the knowledge base into editors.

* ``context.py`` — what the cursor points at (a comment, a string, an
  identifier, a ``clawkb:ANCHOR`` reference); plain functions over text.
* ``render.py`` — hits as hover Markdown and as a results document.
* ``server.py`` — the pygls wiring (hover, ``workspace/symbol``, code action
  and its command, go to definition); needs the ``lsp`` extra.
"""

from __future__ import annotations

from pathlib import Path


def serve(home: Path | None) -> None:
    """Serve over stdio until the client exits (``home`` None: found from the workspace)."""
    from clawkb.lsp.server import build_server

    build_server(home).start_io()
