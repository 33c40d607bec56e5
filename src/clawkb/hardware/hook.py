"""The ingest hook that makes datasheets special (see :class:`clawkb.ingest.pipeline.IngestHook`).

For a file below a datasheet root it (1) chunks register, address, bit-field,
reset-value and pin tables one row per chunk with the header repeated, so
"GPIOA_MODER reset value" lands on that row, and (2) inside the file's write
transaction records the board and re-extracts the pin aliases. Aliases go
away with their document (``ON DELETE CASCADE``).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from clawkb.hardware.aliases import extract_aliases
from clawkb.hardware.boards import all_roots, infer_board, root_of
from clawkb.ingest.chunker import ChunkConfig
from clawkb.store.hardware_repo import clear_document, save_document
from clawkb.store.repo import Repository
from clawkb.types import ParsedDocument

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

#: Header words that make a table a register/pin table (whole words; CJK by substring).
_ROW_TABLE_WORDS = frozenset(
    {
        "register",
        "registers",
        "reg",
        "address",
        "addr",
        "offset",
        "bit",
        "bits",
        "field",
        "reset",
        "pin",
        "pins",
        "gpio",
    }
)
_ROW_TABLE_CJK = ("寄存器", "地址", "偏移", "位域", "复位", "引脚", "管脚")
_WORD = re.compile(r"[a-z]+")


def is_row_table(header: str) -> bool:
    """True when a table header names registers, addresses, bit fields, reset values or pins."""
    h = header.casefold()
    return bool(_ROW_TABLE_WORDS.intersection(_WORD.findall(h))) or any(
        w in h for w in _ROW_TABLE_CJK
    )


class DatasheetHook:
    """Board + alias extraction for files below the datasheet roots."""

    #: ingest hooks run by order (clawkb.plugins): boards before the knowledge hook
    order = 10

    def __init__(self, roots: list[str]) -> None:
        self.roots = roots

    @classmethod
    def for_kb(cls, kb: KnowledgeBase) -> DatasheetHook:
        return cls(all_roots(kb.conn, kb.config, kb.home))

    def chunk_config(self, path: str, parsed: ParsedDocument, config: ChunkConfig) -> ChunkConfig:
        if root_of(path, self.roots) is None:
            return config
        return replace(config, row_tables=is_row_table)

    def stored(self, repo: Repository, doc_id: int, path: str, parsed: ParsedDocument) -> None:
        root = root_of(path, self.roots)
        if root is None:
            clear_document(repo, doc_id)
            return
        board = infer_board(path, root, parsed.metadata)
        save_document(repo, doc_id, board, extract_aliases(parsed.slices))
