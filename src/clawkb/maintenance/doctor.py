"""`clawkb doctor [--repair]`: check the store, the lexical index and the vectors.

Each check yields one :class:`Finding` (one line for humans, a dict for
``--json``). With ``repair`` the index is rebuilt from the store and stray
vector rows are dropped; a damaged store cannot be rebuilt from anything
else, so the doctor names `clawkb restore` instead.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from clawkb.errors import ClawkbError
from clawkb.index.lexical import LexicalIndex
from clawkb.store import db, pragmas, vectors_repo

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase


@dataclass
class Finding:
    check: str
    ok: bool
    message: str
    repaired: str | None = None

    def line(self) -> str:
        state = "ok" if self.ok else ("fixed" if self.repaired else "FAIL")
        text = f"{state:<6}{self.check}: {self.message}"
        return f"{text} -> {self.repaired}" if self.repaired else text


@dataclass
class DoctorReport:
    home: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return all(f.ok or f.repaired for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "home": self.home,
            "healthy": self.healthy,
            "findings": [asdict(f) for f in self.findings],
        }


def registered_checks() -> tuple[tuple[str, Callable[[KnowledgeBase], Finding]], ...]:
    """The ``clawkb.doctor_checks`` plugins, ``(kb) -> Finding`` each (the parser sandbox
    is one, declared like a third-party check)."""
    from clawkb.plugins import load_group

    return load_group("clawkb.doctor_checks")


def run_doctor(home: Path, *, repair: bool = False, wait: float = 30.0) -> DoctorReport:
    from clawkb.kb import KnowledgeBase

    report = DoctorReport(str(home))
    add = report.findings.append
    store = home / db.DB_NAME
    if not store.exists():
        add(Finding("store", False, f"{store}: missing (no knowledge base here)"))
        return report
    try:
        db.check_store_file(store)
        kb = KnowledgeBase.open(home)
    except (ClawkbError, sqlite3.DatabaseError) as exc:
        add(Finding("store", False, f"{exc}; restore a backup with `clawkb restore BACKUP`"))
        return report
    try:
        store_ok = _check_store(kb, add)
        if not store_ok:
            add(Finding("index", False, "not checked: the store is damaged (restore a backup)"))
            return report
        _check_index(kb, add, repair, wait)
        _check_vectors(kb, add, repair, wait)
        for name, check in registered_checks():
            try:
                add(check(kb))
            except Exception as exc:  # a broken plugin check is a finding, not a crash
                add(Finding(name, False, f"the check failed: {str(exc) or type(exc).__name__}"))
    finally:
        kb.close()
    return report


def check_sandbox(kb: KnowledgeBase) -> Finding:
    """The parser sandbox: informational (the resource limits apply either way)."""
    from clawkb.parsers.sandbox import sandbox_status

    st = sandbox_status()
    state = "on" if st.seccomp else "off"
    return Finding("parser sandbox", True, f"seccomp filter {state}: {st.detail}")


def _check_store(kb: KnowledgeBase, add: Callable[[Finding], None]) -> bool:
    try:
        rows = pragmas.integrity_check(kb.conn)
        fk = pragmas.foreign_key_violations(kb.conn)
    except sqlite3.DatabaseError as exc:
        rows, fk = [str(exc)], []
    if rows != ["ok"]:
        add(
            Finding(
                "store",
                False,
                f"integrity_check: {'; '.join(rows[:3])}; restore a backup with"
                " `clawkb restore BACKUP`",
            )
        )
        return False
    bad = db.undecodable_rows(kb.home / db.DB_NAME)
    if bad:
        add(
            Finding(
                "store",
                False,
                f"{len(bad)} rows hold text that is not UTF-8 ({', '.join(bad[:3])}): the"
                " store is damaged; restore a backup with `clawkb restore BACKUP`",
            )
        )
        return False
    counts = kb.repo.counts()
    msg = f"integrity_check ok ({counts['documents']} documents, {counts['chunks']} chunks)"
    if fk:
        add(Finding("store", False, f"{len(fk)} rows point at missing rows ({fk[0][0]})"))
        return True
    add(Finding("store", True, msg))
    return True


def _index_state(kb: KnowledgeBase) -> tuple[str | None, LexicalIndex]:
    """A fresh, fully checksummed look at the published index; the problem or None."""
    from clawkb.ingest.sync import index_problem

    lex = LexicalIndex(kb.lexical.folder, kb.lexical.params, store_id=kb.store_id, full_check=True)
    problem = index_problem(kb.repo, lex)
    if problem is None:
        top = kb.repo.max_seq()
        if 0 <= lex.applied_seq < top:
            return None, lex  # lagging: replayable, reported separately
        live = [np.asarray(s.chunk_ids)[s.live.astype(bool)] for s in lex.segments]
        in_index = set(np.concatenate(live).tolist()) if live else set()
        in_store = set(kb.repo.all_chunk_ids())
        if lex.applied_seq == top and in_index != in_store:
            missing, extra = len(in_store - in_index), len(in_index - in_store)
            problem = (
                f"{lex.folder}: the index disagrees with the store"
                f" ({missing} chunks missing, {extra} unknown chunks)"
            )
    return problem, lex


def _check_index(
    kb: KnowledgeBase, add: Callable[[Finding], None], repair: bool, wait: float
) -> None:
    from clawkb.ingest.sync import rebuild_lexical, sync_lexical

    problem, lex = _index_state(kb)
    lag = max(0, kb.repo.max_seq() - lex.applied_seq) if lex.applied_seq >= 0 else 0
    docs = lex.n_docs
    gen = lex.generation
    lex.close()
    if problem is None and not lag:
        add(Finding("index", True, f"generation {gen}, {docs} chunks, checksums ok"))
        return
    message = problem or f"the index lags the store by {lag} changes"
    if not repair:
        add(Finding("index", False, f"{message}; run `clawkb doctor --repair`"))
        return
    with kb.writer(wait=wait):
        if problem is not None and not kb.repairs:
            rebuild_lexical(kb.repo, kb.lexical, kb.config.index_batch_chunks)
        sync_lexical(kb.repo, kb.lexical, kb.config.index_batch_chunks)
    after, lex = _index_state(kb)
    lex.close()
    if after is None:
        add(Finding("index", False, message, repaired=f"rebuilt from the store ({docs_of(kb)})"))
    else:
        add(Finding("index", False, f"{message}; repair failed: {after}"))


def docs_of(kb: KnowledgeBase) -> str:
    return f"{kb.repo.counts()['chunks']} chunks"


def _check_dense_files(
    kb: KnowledgeBase,
    sig: dict[str, Any],
    add: Callable[[Finding], None],
    repair: bool,
    wait: float,
) -> None:
    """The dense vector files (a cache of the store's vectors) against the size and
    checksum in their ``meta.json``; ``--repair`` rebuilds them from the store."""
    import shutil

    from clawkb.index.dense import DenseIndex, cache_folder, verify

    folder = cache_folder(kb.home, sig)
    meta_path = folder / "meta.json"
    if not meta_path.is_file():
        return  # built by the first dense search
    try:
        meta = json.loads(meta_path.read_text())
        problem = verify(folder, meta) if isinstance(meta, dict) else "not a JSON object"
    except (OSError, ValueError) as exc:
        problem = f"{meta_path}: unreadable ({exc})"
    if problem is None:
        add(Finding("dense files", True, f"{folder.name}: sizes and checksums match"))
        return
    if not repair:
        add(Finding("dense files", False, f"{problem}; run `clawkb doctor --repair`"))
        return
    with kb.write_lock(wait):
        shutil.rmtree(folder, ignore_errors=True)
        dense = DenseIndex(kb.home / "index" / "dense", kb.conn, sig)
        dense.refresh()
    add(
        Finding(
            "dense files",
            True,
            problem,
            repaired=f"rebuilt {len(dense.ids)} vectors from the store",
        )
    )


def _check_vectors(
    kb: KnowledgeBase, add: Callable[[Finding], None], repair: bool, wait: float
) -> None:
    from clawkb.embed import vectors

    sig = vectors.stored_signature(kb.conn)
    if sig is None:
        add(Finding("vectors", True, "none stored (lexical search only)"))
        return
    mkey = vectors.model_key(sig)
    _check_dense_files(kb, sig, add, repair, wait)
    orphans, dangling, unused = vectors_repo.health_counts(kb.conn, mkey)
    pending = len(vectors.pending_chunk_ids(kb.conn, mkey))
    note = f"; {pending} chunks not embedded yet (`clawkb embed`)" if pending else ""
    stale = orphans + unused
    if stale:  # normal after edits: the next embed run sweeps them
        note += f"; {stale} stale rows of deleted text (swept by the next `clawkb embed`)"
    if not dangling and not (repair and stale):
        add(Finding("vectors", True, f"{mkey}: chunks and vectors agree{note}"))
        return
    found = f"{dangling} chunks point at a missing vector" if dangling else "stale rows"
    if not repair:
        add(Finding("vectors", False, f"{mkey}: {found}{note}; run `clawkb doctor --repair`"))
        return
    with kb.write_lock(wait), db.transaction(kb.conn):
        vectors_repo.drop_stray(kb.conn, mkey)
        vectors.bump_version(kb.conn)
    ok = not dangling
    add(Finding("vectors", ok, f"{mkey}: {found}", repaired=f"dropped stray rows{note}"))
