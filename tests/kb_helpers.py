"""Small knowledge bases for tests: a folder of documents, indexed (and embedded).

One place for the setup many test modules repeat: write ``{name: text}`` into a
``docs`` folder, index it into a real KB, optionally embed it with the shipped model.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from clawkb.kb import KnowledgeBase

if TYPE_CHECKING:
    from clawkb.index.dense import DenseIndex

#: One line of board documentation, for tests that only need something indexed.
UART_DOC = {"uart.md": "# UART\n\nThe debug console is UART2 at 1500000 baud.\n"}


def write_docs(root: Path, docs: Mapping[str, str]) -> Path:
    """``root/docs`` holding ``docs`` (file name -> text, UTF-8); returns the folder."""
    folder = root / "docs"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text, "utf-8")
    return folder


def build_kb(root: Path, docs: Mapping[str, str], *, embed: bool = False) -> tuple[Path, Path]:
    """Write ``docs`` under ``root``, index them into ``root/kb`` (and embed them with the
    configured model when ``embed``); returns (KB home, docs folder)."""
    folder = write_docs(root, docs)
    home = root / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([folder])
        if embed:
            from clawkb.embed.run import embed_kb

            embed_kb(kb)
    return home, folder


def dense_copy(kb: KnowledgeBase) -> DenseIndex:
    """``kb``'s dense copy for its stored vectors' model, brought up to date."""
    from clawkb.embed import vectors
    from clawkb.index.dense import DenseIndex

    sig = vectors.stored_signature(kb.conn)
    assert sig is not None
    dense = DenseIndex(kb.home / "index" / "dense", kb.conn, sig)
    dense.refresh()
    return dense
