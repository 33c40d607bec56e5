"""`clawkb backup DEST` and `clawkb restore SRC`.

A backup is a folder: ``clawkb.sqlite`` written with SQLite's online backup
API (a consistent copy while others read and write), the lexical index
generation that was current when it started (leased, so it cannot vanish
mid-copy; its files are checked against the manifest's checksums), the
files that are part of the KB without being in the store (:data:`KB_ITEMS`:
``config.yaml``, the synonym file, ``roles/``, the agents' learned notes in
``learned/``, ``learned-pending/`` and ``learned-rejected/``) and
``BACKUP.json`` describing it.

Restore copies the store back through the same API, puts those files back
(replacing the KB's own), then rebuilds the lexical index from the restored
store. The index can therefore never be ahead of, or foreign to, the store it
serves (defect 7), whatever was in the KB folder before. When the backup is
restored into another folder, documents that lived in the old KB folder (the
learned notes) are re-indexed at their new place, so search, ``learned list``
and the viewer all point at the restored KB.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

from clawkb import __version__
from clawkb.errors import StoreError
from clawkb.index import generations as gens
from clawkb.index.lexical import LexicalIndex
from clawkb.kb import LOCK_NAME, KnowledgeBase
from clawkb.store import db, pragmas
from clawkb.store.locking import FileLock

INFO = "BACKUP.json"
#: What is the KB besides the store and its indexes (relative to the KB folder).
KB_ITEMS = (
    "config.yaml",
    "synonyms.txt",
    "roles",
    "learned",
    "learned-pending",
    "learned-rejected",
)


def kb_items(kb: KnowledgeBase) -> list[str]:
    """:data:`KB_ITEMS` plus a configured synonym file that lives inside the KB folder."""
    items = list(KB_ITEMS)
    syn = str(getattr(kb.config.retrieval, "synonyms", "") or "")
    if syn:
        p = Path(syn).expanduser()
        p = p if p.is_absolute() else kb.home / p
        try:
            rel = p.resolve().relative_to(kb.home.resolve()).as_posix()
        except ValueError:
            rel = ""
        if rel and rel not in items:
            items.append(rel)
    return items


def backup(kb: KnowledgeBase, dest: Path) -> dict[str, Any]:
    """Write a consistent backup of ``kb`` into the new folder ``dest``."""
    if dest.exists() and any(dest.iterdir()):
        raise StoreError(f"{dest}: the backup folder must be new or empty")
    dest.mkdir(parents=True, exist_ok=True)
    # Lease the index first: the store copy taken after it is at least as new.
    lex = LexicalIndex(kb.lexical.folder, kb.lexical.params, store_id=kb.store_id, full_check=True)
    try:
        target = sqlite3.connect(dest / db.DB_NAME)
        try:
            kb.conn.backup(target)
            pragmas.make_self_contained(target)  # one self-contained file
        finally:
            target.close()
        index_note = _copy_index(lex, dest / "index" / "lexical")
    finally:
        lex.close()
    copied = _copy_items(kb.home, dest, kb_items(kb))
    check = sqlite3.connect(dest / db.DB_NAME)
    try:
        seq, docs = pragmas.backup_summary(check)
    finally:
        check.close()
    info = {
        "created_at": time.time(),
        "clawkb_version": __version__,
        "source": str(kb.home),
        "store_id": kb.store_id,
        "store_seq": seq,
        "documents": docs,
        "index": index_note,
        "files": copied,
    }
    (dest / INFO).write_text(json.dumps(info, indent=2))
    return info


def _copy_items(src: Path, dest: Path, items: list[str]) -> list[str]:
    """Copy each item (file or folder) of ``src`` that exists; symlinks are not followed."""
    copied = []
    for rel in items:
        p = src / rel
        if p.is_symlink():
            continue
        if p.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, dest / rel)
        elif p.is_dir():
            shutil.copytree(p, dest / rel, symlinks=True)
        else:
            continue
        copied.append(rel)
    return copied


def _copy_index(lex: LexicalIndex, dest: Path) -> str:
    if lex.damaged or not lex.segments:
        return f"not copied ({lex.damaged or 'empty'}); restore rebuilds it"
    m = lex.manifest
    for rel, (size, crc) in m.files.items():
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(lex.folder / rel, out)
        if gens.crc_file(out) != (size, crc):
            shutil.rmtree(dest, ignore_errors=True)
            return f"not copied ({rel} changed while copying); restore rebuilds it"
    from dataclasses import asdict

    gens.write_json_atomic(dest / gens.MANIFEST, asdict(m))
    return f"generation {m.generation}, {lex.n_docs} chunks"


def check_backup(src: Path) -> Path:
    """The backup's store, after checking it is a sound clawkb store we can read."""
    store = src / db.DB_NAME
    if not store.is_file():
        raise StoreError(f"{src}: not a clawkb backup (no {db.DB_NAME})")
    db.check_store_file(store)
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        db.refuse_newer(conn, store)
        rows = pragmas.integrity_check(conn)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{store}: damaged backup ({exc})") from exc
    finally:
        conn.close()
    if rows != ["ok"]:
        raise StoreError(f"{store}: damaged backup ({'; '.join(rows[:2])})")
    return store


def restore(home: Path, src: Path, *, wait: float = 30.0) -> dict[str, Any]:
    """Replace the KB at ``home`` with the backup in ``src`` and rebuild its index."""
    store = check_backup(src)
    home.mkdir(parents=True, exist_ok=True)
    home = home.resolve()
    info = _backup_info(src)
    lock = FileLock(home / LOCK_NAME)
    if not lock.acquire(wait):
        raise StoreError(f"{home}: another clawkb process is writing; try again when it finishes")
    try:
        _replace_store(home / db.DB_NAME, store)
        items = info.get("files")
        _restore_items(src, home, items if isinstance(items, list) else list(KB_ITEMS))
    finally:
        lock.release()
    old_home = str(info.get("source") or "")
    with KnowledgeBase.open(home) as kb:
        from clawkb.embed.vectors import bump_version
        from clawkb.ingest.sync import rebuild_lexical

        with kb.writer(wait=wait):
            with kb.repo.transaction():
                bump_version(kb.conn)  # dense search copies reload from the restored rows
                # an older backup without learned/ keeps its notes where they were
                moved = _forget_old_home(kb, old_home) if (src / "learned").is_dir() else 0
            if moved or not kb.repairs:  # else the writer already rebuilt a mismatched index
                rebuild_lexical(kb.repo, kb.lexical, kb.config.index_batch_chunks)
        notes = sorted((home / "learned").glob("*/*.md"))
        if moved and notes:  # the learned notes, at their new place
            kb.index(notes, wait=wait)
        counts = kb.repo.counts()
        return {
            "home": str(home),
            "from": str(src),
            "store_id": kb.store_id,
            "store_seq": kb.repo.max_seq(),
            "documents": counts["documents"],
            "chunks": counts["chunks"],
            "index_generation": kb.lexical.generation,
        }


def _backup_info(src: Path) -> dict[str, Any]:
    try:
        data = json.loads((src / INFO).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _restore_items(src: Path, home: Path, items: list[Any]) -> None:
    """The backup's KB files in place of the KB's own (a folder is replaced whole)."""
    for rel in items:
        if not _restorable(rel):
            continue
        source, target = src / rel, home / rel
        if source.is_symlink() or not (source.is_file() or (rel in KB_ITEMS and source.is_dir())):
            continue
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True)
        else:
            shutil.copy2(source, target)


def _restorable(rel: object) -> bool:
    """A KB item, or a relative file path that cannot touch the store, index or locks."""
    if rel in KB_ITEMS:
        return True
    if not isinstance(rel, str) or not rel or rel.startswith("/") or "\\" in rel:
        return False
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return False
    first = parts[0]
    return not (
        first.startswith(db.DB_NAME) or first in ("index", "cache") or first.endswith(".lock")
    )


def _forget_old_home(kb: KnowledgeBase, old_home: str) -> int:
    """Drop the documents that lived in the backed-up KB's folder when it is not this one."""
    if not old_home or Path(old_home).resolve() == kb.home.resolve():
        return 0
    docs = kb.repo.documents_under(Path(old_home).as_posix())
    for doc in docs.values():
        kb.repo.remove_document(doc)
    return len(docs)


def _replace_store(target: Path, source: Path) -> None:
    """Copy ``source`` over ``target``: through SQLite when the target is usable (other
    connections see the new content), else by replacing the file."""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        usable = False
        if target.exists():
            try:
                db.check_store_file(target)
                usable = True
            except StoreError:
                usable = False
        if usable:
            dst = sqlite3.connect(target, timeout=30.0)
            try:
                src.backup(dst)
            except sqlite3.DatabaseError:
                usable = False
            finally:
                dst.close()
        if not usable:
            tmp = target.with_name(target.name + ".restore-tmp")
            tmp.unlink(missing_ok=True)
            dst = sqlite3.connect(tmp)
            try:
                src.backup(dst)
            finally:
                dst.close()
            for suffix in ("-wal", "-shm"):
                target.with_name(target.name + suffix).unlink(missing_ok=True)
            tmp.replace(target)
    finally:
        src.close()
