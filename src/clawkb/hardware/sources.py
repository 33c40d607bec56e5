"""Indexing datasheet folders: ``clawkb index --datasheets DIR`` and ``datasheets:`` in config.

A datasheet folder is remembered in the store, so any later run that touches
its files (plain ``clawkb index``, ``clawkb watch``) keeps boards and aliases
up to date through :class:`clawkb.hardware.hook.DatasheetHook`. Files that
were indexed before their folder became a datasheet folder are re-parsed once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from clawkb.errors import ConfigError
from clawkb.hardware.boards import configured_roots, register_roots
from clawkb.ingest.pipeline import IndexReport, Progress
from clawkb.store import hardware_repo

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase


def index_datasheets(
    kb: KnowledgeBase,
    paths: Sequence[str | os.PathLike[str]] = (),
    datasheets: Sequence[str | os.PathLike[str]] = (),
    *,
    progress: Progress | None = None,
    wait: float = 30.0,
    on_wait: Callable[[str], None] | None = None,
    include: Sequence[str] = (),
) -> IndexReport:
    """Index ``paths`` plus datasheet folders (``datasheets``, else those in config.yaml)."""
    folders = [Path(d).expanduser().resolve() for d in datasheets]
    for f in folders:
        if not f.is_dir():
            raise ConfigError(f"--datasheets {f}: not a folder")
    roots = [f.as_posix() for f in folders] or configured_roots(kb.config, kb.home)
    if not roots and not paths:
        raise ConfigError(
            "nothing to index: give PATH..., --datasheets DIR, or `datasheets:` in config.yaml"
        )
    missing = [r for r in roots if not Path(r).is_dir()]
    if missing:
        raise ConfigError(f"datasheet folder not found: {missing[0]} (from config.yaml)")
    register_roots(kb.conn, roots)
    _mark_stale(kb, roots)
    return kb.index(
        [*paths, *roots], progress=progress, wait=wait, on_wait=on_wait, include=include
    )


def _mark_stale(kb: KnowledgeBase, roots: Sequence[str]) -> None:
    """Files indexed as plain notes under a new datasheet folder get re-parsed once."""
    with kb.repo.transaction() as conn:
        for root in roots:
            prefix = root.rstrip("/") + "/"
            hardware_repo.mark_plain_notes_stale(conn, prefix)
