"""The dense search copy follows writes row by row: new vectors appended, deleted
chunks' rows dropped, nothing rewritten when no vector changed; a full
rebuild only when the old copy cannot be trusted (damaged, another epoch). After
every step the copy is exactly what a full rebuild from the store gives."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clawkb.embed.run import embed_kb, embed_new, reembed_kb
from clawkb.index.dense import DenseIndex, _read_meta
from clawkb.kb import KnowledgeBase
from clawkb.store import vectors_repo
from kb_helpers import dense_copy

pytest.importorskip("static_model")


def _note(folder: Path, i: int) -> None:
    (folder / f"n{i:02d}.md").write_text(
        f"# Note {i}\n\nThe board{i} uses UART{i} at {9600 * (i + 1)} baud.\n\n"
        f"## Power {i}\n\nRail {i} carries {i}.{i} volts to the sensor{i}.\n",
        encoding="utf-8",
    )


@pytest.fixture
def kb_home(tmp_path: Path) -> tuple[Path, Path]:
    home, docs = tmp_path / "kb", tmp_path / "docs"
    home.mkdir()
    docs.mkdir()
    (home / "config.yaml").write_text("embedding: static\n", "utf-8")
    for i in range(6):
        _note(docs, i)
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([docs])
        embed_kb(kb)
    return home, docs


def _matches_the_store(kb: KnowledgeBase, dense: DenseIndex) -> None:
    rows = vectors_repo.matrix_rows(kb.conn, dense.mkey)
    assert dense.ids.tolist() == [r[0] for r in rows]
    want = np.frombuffer(b"".join(r[1] for r in rows), "<f4").reshape(len(rows), -1)
    assert np.array_equal(np.asarray(dense.mat), want)


def test_add_delete_and_reopen_update_the_copy_in_place(kb_home: tuple[Path, Path]) -> None:
    home, docs = kb_home
    with KnowledgeBase.open(home) as kb:
        dense = dense_copy(kb)
        assert dense.meta["built"] == "full"
        first = len(dense.ids)

        for i in (6, 7):  # add: two notes' vectors appended
            _note(docs, i)
        kb.index([docs])
        embed_new(kb)
        dense = dense_copy(kb)
        assert dense.meta["built"] == "incremental" and len(dense.ids) > first
        _matches_the_store(kb, dense)

        had = set(dense.ids.tolist())
        (docs / "n02.md").unlink()  # delete: its rows dropped
        kb.index([docs])
        dense = dense_copy(kb)
        assert dense.meta["built"] == "incremental"
        _matches_the_store(kb, dense)
        assert set(dense.ids.tolist()) < had

        # a write that changes no vector (a note not embedded yet): nothing is rewritten,
        # not even meta.json (and no lock taken); the copy serves the new stamp as it is
        files = [dense.folder / name for name in ("vecs.npy", "ids.npy", "meta.json")]
        before = [(f.stat().st_ino, f.stat().st_mtime_ns) for f in files]
        _note(docs, 8)
        kb.index([docs])
        dense = dense_copy(kb)
        assert [(f.stat().st_ino, f.stat().st_mtime_ns) for f in files] == before
        assert dense._stamp == dense.stamp() and dense.meta["stamp"] != dense.stamp()
        _matches_the_store(kb, dense)

    with KnowledgeBase.open(home) as kb:  # reopen: a fresh reader loads it as it is
        dense = dense_copy(kb)
        _matches_the_store(kb, dense)
        res = kb.search("sensor7 volts", mode="dense", limit=3)
        assert res.hits and res.hits[0].anchor.path.endswith("n07.md")


def test_a_damaged_or_reset_copy_is_rebuilt_in_full(kb_home: tuple[Path, Path]) -> None:
    home, docs = kb_home
    with KnowledgeBase.open(home) as kb:
        dense = dense_copy(kb)
        vecs = dense.folder / "vecs.npy"
        raw = bytearray(vecs.read_bytes())
        for k in range(len(raw) - 512, len(raw)):
            raw[k] ^= 0x5A
        vecs.write_bytes(bytes(raw))  # damaged, then a write adds vectors
        _note(docs, 9)
        kb.index([docs])
        embed_new(kb)
        dense = dense_copy(kb)
        assert dense.meta["built"] == "full"  # never patched from a damaged copy
        _matches_the_store(kb, dense)

        reembed_kb(kb)  # every vector dropped and made again: another epoch
        dense = dense_copy(kb)
        assert dense.meta["built"] == "full" and dense.meta["epoch"] == 1
        _matches_the_store(kb, dense)


def test_an_old_copy_without_an_epoch_is_rebuilt(kb_home: tuple[Path, Path]) -> None:
    home, _ = kb_home
    with KnowledgeBase.open(home) as kb:
        dense = dense_copy(kb)
        meta = _read_meta(dense.folder / "meta.json")
        del meta["epoch"]  # as written before copies were updated row by row
        meta["stamp"] = [0, 0]
        (dense.folder / "meta.json").write_text(json.dumps(meta))
        dense = dense_copy(kb)
        assert dense.meta["built"] == "full"
        _matches_the_store(kb, dense)


_REFRESH = """
import sys
from pathlib import Path
from clawkb.embed import vectors
from clawkb.index.dense import DenseIndex
from clawkb.kb import KnowledgeBase
with KnowledgeBase.open(Path(sys.argv[1])) as kb:
    sig = vectors.stored_signature(kb.conn)
    DenseIndex(kb.home / "index" / "dense", kb.conn, sig).refresh()
print("refreshed", flush=True)
"""


def test_a_copy_another_process_is_rebuilding_is_waited_for(kb_home: tuple[Path, Path]) -> None:
    """Two processes that find the copy outdated (``serve --workers``, a terminal
    search beside ``serve``) take turns: one's files never land beside the other's
    ``meta.json``. The second waits on the cache lock the first holds."""
    import subprocess
    import sys
    import time

    from clawkb.store.locking import FileLock

    home, docs = kb_home
    with KnowledgeBase.open(home) as kb:
        dense = dense_copy(kb)
        folder = dense.folder
        _note(docs, 9)
        kb.index([docs])
        embed_new(kb)  # the copy is now behind the store
    before = _read_meta(folder / "meta.json")["stamp"]
    lock = FileLock(folder / ".lock")
    assert lock.try_acquire()  # as another process's rebuild would
    child = subprocess.Popen(
        [sys.executable, "-c", _REFRESH, str(home)], stdout=subprocess.PIPE, text=True
    )
    try:
        time.sleep(1.5)
        assert child.poll() is None, "the refresh went ahead under another process's lock"
        assert _read_meta(folder / "meta.json")["stamp"] == before
    finally:
        lock.release()
    out, _ = child.communicate(timeout=120)
    assert child.returncode == 0 and "refreshed" in out
    with KnowledgeBase.open(home) as kb:
        dense = dense_copy(kb)
        assert _read_meta(folder / "meta.json")["stamp"] != before
        _matches_the_store(kb, dense)
