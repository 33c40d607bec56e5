"""A process that lives for days must not leak: opening, searching and closing a KB
many times leaves the number of open file descriptors where it was."""

from __future__ import annotations

import gc
import os
import shutil
from pathlib import Path

from clawkb import KnowledgeBase

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "notes"


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_open_search_close_does_not_leak_descriptors(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "notes")
    home = tmp_path / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([tmp_path / "notes"])
    # warm up once (module-level caches, the glossary), then count
    with KnowledgeBase.open(home) as kb:
        kb.search("DDR 走线阻抗")
    before = _open_fds()
    for i in range(20):
        with KnowledgeBase.open(home) as kb:
            kb.search("DDR 走线阻抗")
            kb.search("TJA1051", mode="lexical", explain=True)
            kb.memory.store(f"a note to keep {i}")
            kb.memory.recall("note to keep")
    gc.collect()  # cycles among closed objects go at the next collection, not later
    assert _open_fds() - before <= 2
