"""Damage to the index and the store: detected, one line, repaired from the store (issue 9).

Every kind of index file is truncated, emptied or overwritten with random
bytes in a copy of a real KB; a search must then give the right answer (a
reader repairs the index when the writer lock is free) or one error line, and
`clawkb doctor --repair` must leave a correct, checksum-clean index.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from clawkb.errors import IndexError_
from clawkb.kb import KnowledgeBase
from clawkb.maintenance.backup import backup, restore
from clawkb.maintenance.doctor import run_doctor
from clawkb.store.locking import FileLock
from safety_helpers import make_corpus, unique, write_doc

CLAWKB = str(Path(sys.executable).parent / "clawkb")
SEGMENT_FILES = [
    "chunk_ids.npy",
    "lens.npy",
    "terms.npy",
    "dfs.npy",
    "dict_index.npy",
    "packed.npy",
    "blk_pos.npy",
]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tpl")
    make_corpus(root / "notes", 12)
    with KnowledgeBase.open(root / "kb", create=True) as kb:
        kb.index([root / "notes"])
        # a second batch with a deletion: the KB then has a live mask file too
        (root / "notes" / "doc011.md").unlink()
        write_doc(root / "notes", 12, 0, random.Random(2))
        kb.index([root / "notes"])
    return root


def _copy(template: Path, tmp_path: Path) -> Path:
    shutil.copytree(template / "kb", tmp_path / "kb")
    return tmp_path / "kb"


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    else:  # random bytes inside the file, length unchanged
        rng = random.Random(len(data))
        start = len(data) // 3
        junk = bytes(rng.randrange(256) for _ in range(max(1, min(64, len(data) - start))))
        path.write_bytes(data[:start] + junk + data[start + len(junk) :])


def _index_files(home: Path) -> list[Path]:
    lex = home / "index" / "lexical"
    manifest = json.loads((lex / "manifest.json").read_text())
    return [lex / rel for rel in manifest["files"]]


def _assert_correct(home: Path) -> list[str]:
    """Every file's unique word finds exactly that file; returns the warnings seen."""
    warnings: list[str] = []
    with KnowledgeBase.open(home) as kb:
        for i in [0, 3, 7, 10, 12]:
            res = kb.search(unique(i), limit=3)
            warnings += res.warnings
            assert res.hits and res.hits[0].anchor.path.endswith(f"doc{i:03d}.md"), (i, res)
            assert unique(i) in res.hits[0].matched_terms
        gone = kb.search(unique(11)).hits  # the deleted file stays deleted
        assert not any(h.anchor.path.endswith("doc011.md") for h in gone)
    return warnings


def _finds(kb: KnowledgeBase, i: int) -> bool:
    return any(h.anchor.path.endswith(f"doc{i:03d}.md") for h in kb.search(unique(i)).hits)


def test_template_has_every_kind_of_index_file(template: Path) -> None:
    names = {p.name.split("-")[0] for p in _index_files(template / "kb")}
    assert set(SEGMENT_FILES) <= names and "live" in names and "meta.json" in names


@pytest.mark.parametrize("how", ["truncate", "empty", "random"])
@pytest.mark.parametrize("kind", [*SEGMENT_FILES, "meta.json", "live"])
def test_a_damaged_index_file_is_repaired_by_the_next_reader(
    template: Path, tmp_path: Path, kind: str, how: str
) -> None:
    home = _copy(template, tmp_path)
    victims = [p for p in _index_files(home) if p.name.split("-")[0] == kind]
    assert victims
    _damage(victims[0], how)
    report = run_doctor(home)
    assert not report.healthy
    assert any(victims[0].name in f.message for f in report.findings if not f.ok)
    warnings = _assert_correct(home)
    assert any(w.startswith("repaired:") for w in warnings), warnings
    assert run_doctor(home).healthy


@pytest.mark.parametrize("how", ["truncate", "empty", "random", "missing"])
def test_a_damaged_manifest_is_repaired(template: Path, tmp_path: Path, how: str) -> None:
    home = _copy(template, tmp_path)
    manifest = home / "index" / "lexical" / "manifest.json"
    if how == "missing":
        manifest.unlink()
    else:
        _damage(manifest, how)
    _assert_correct(home)
    assert run_doctor(home).healthy


def test_doctor_repair_from_the_cli(template: Path, tmp_path: Path) -> None:
    home = _copy(template, tmp_path)
    _damage(next(p for p in _index_files(home) if p.name == "packed.npy"), "random")
    found = subprocess.run(
        [CLAWKB, "--kb", str(home), "doctor"], capture_output=True, text=True, check=False
    )
    assert found.returncode == 1
    assert "FAIL  index" in found.stdout and "checksum" in found.stdout
    fixed = subprocess.run(
        [CLAWKB, "--kb", str(home), "doctor", "--repair", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert fixed.returncode == 0, fixed.stderr
    data = json.loads(fixed.stdout)
    assert data["healthy"] and any(f["repaired"] for f in data["findings"])
    _assert_correct(home)


def test_damage_while_a_writer_runs_is_one_line_error(template: Path, tmp_path: Path) -> None:
    home = _copy(template, tmp_path)
    _damage(next(p for p in _index_files(home) if p.name == "terms.npy"), "empty")
    lock = FileLock(home / "write.lock")
    assert lock.try_acquire()  # another writer holds the KB
    try:
        with KnowledgeBase.open(home) as kb, pytest.raises(IndexError_) as err:
            kb.search(unique(3))
        assert "terms.npy" in str(err.value) and "\n" not in str(err.value)
        out = subprocess.run(
            [CLAWKB, "--kb", str(home), "search", unique(3)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert out.returncode == 2 and "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
    finally:
        lock.release()
    _assert_correct(home)


@pytest.mark.parametrize("how", ["truncate", "empty", "random"])
def test_a_damaged_store_gives_one_line_or_correct_results(
    template: Path, tmp_path: Path, how: str
) -> None:
    home = _copy(template, tmp_path)
    store = home / "clawkb.sqlite"
    if how == "random":  # junk in every page after the first
        data = bytearray(store.read_bytes())
        rng = random.Random(5)
        for off in range(4096, len(data), 4096):
            pos = off + rng.randrange(0, 4000)
            data[pos : pos + 64] = rng.randbytes(64)
        store.write_bytes(bytes(data))
    else:
        _damage(store, how)
    out = subprocess.run(
        [CLAWKB, "--kb", str(home), "search", unique(3)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "Traceback" not in out.stderr
    if out.returncode == 0:
        assert "doc003.md" in out.stdout.splitlines()[0]
    else:
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert "clawkb.sqlite" in out.stderr or "store" in out.stderr
        report = run_doctor(home, repair=True)
        assert not report.healthy
        assert "restore" in report.findings[0].message
    # reindex never throws away the working index to rebuild from a broken store
    before = sorted(p.name for p in (home / "index" / "lexical").iterdir())
    subprocess.run([CLAWKB, "--kb", str(home), "reindex"], capture_output=True, check=False)
    if out.returncode != 0:
        assert sorted(p.name for p in (home / "index" / "lexical").iterdir()) == before


def test_reindex_keeps_the_old_index_when_the_store_cannot_be_read(
    template: Path, tmp_path: Path
) -> None:
    home = _copy(template, tmp_path)
    manifest = (home / "index" / "lexical" / "manifest.json").read_text()
    with KnowledgeBase.open(home) as kb:
        real = kb.repo.index_rows

        def broken(ids):  # the store fails half way through the rebuild
            yield from list(real(ids))[:3]
            raise sqlite3.DatabaseError("database disk image is malformed")

        kb.repo.index_rows = broken  # type: ignore[method-assign]
        with pytest.raises(sqlite3.DatabaseError):
            kb.reindex()
    assert (home / "index" / "lexical" / "manifest.json").read_text() == manifest
    _assert_correct(home)


def test_restored_older_store_never_serves_a_newer_index(template: Path, tmp_path: Path) -> None:
    """Defect 7: restore an older store under a newer index, index more: all findable."""
    home = _copy(template, tmp_path)
    notes = template / "notes"
    with KnowledgeBase.open(home) as kb:
        info = backup(kb, tmp_path / "bk")
    assert info["documents"] == 12
    extra = tmp_path / "extra"
    extra.mkdir()
    for i in range(20, 26):
        write_doc(extra, i, 0, random.Random(i))
    with KnowledgeBase.open(home) as kb:
        kb.index([extra])
    # the old way: copy the store file back by hand, under the newer index
    shutil.copyfile(tmp_path / "bk" / "clawkb.sqlite", home / "clawkb.sqlite")
    for suffix in ("-wal", "-shm"):
        (home / f"clawkb.sqlite{suffix}").unlink(missing_ok=True)
    with KnowledgeBase.open(home) as kb:
        st = kb.status()
        assert any("ahead of the store" in w for w in st["warnings"]), st["warnings"]
        more = tmp_path / "more"
        more.mkdir()
        write_doc(more, 30, 0, random.Random(30))
        kb.index([more])
        res = kb.search(unique(30))
        assert res.hits and res.hits[0].anchor.path.endswith("doc030.md")
        assert unique(30) in res.hits[0].matched_terms
        assert not _finds(kb, 21)  # not in the restored store
    # and the supported way
    with KnowledgeBase.open(home) as kb:
        kb.index([extra])
    out = restore(home, tmp_path / "bk")
    assert out["documents"] == 12
    _assert_correct(home)
    with KnowledgeBase.open(home) as kb:
        assert not _finds(kb, 21)
    assert run_doctor(home).healthy
    assert notes.exists()


def test_backup_while_a_writer_works_is_consistent(template: Path, tmp_path: Path) -> None:
    home = _copy(template, tmp_path)
    extra = tmp_path / "extra"
    extra.mkdir()
    for i in range(40, 120):
        write_doc(extra, i, 0, random.Random(i))
    proc = subprocess.Popen(
        [CLAWKB, "--kb", str(home), "index", str(extra), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        out = subprocess.run(
            [CLAWKB, "--kb", str(home), "backup", str(tmp_path / "bk"), "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        proc.communicate(timeout=120)
    info = json.loads(out.stdout)
    restored = tmp_path / "restored"
    done = subprocess.run(
        [CLAWKB, "--kb", str(restored), "restore", str(tmp_path / "bk")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert run_doctor(restored).healthy
    with KnowledgeBase.open(restored) as kb:
        assert kb.repo.counts()["documents"] == info["documents"]
        assert kb.search(unique(3)).hits


def test_store_text_that_is_not_utf8_is_one_line_and_found_by_doctor(
    template: Path, tmp_path: Path
) -> None:
    """Damage inside a row that SQLite's own checks cannot see."""
    home = _copy(template, tmp_path)
    conn = sqlite3.connect(home / "clawkb.sqlite")
    conn.execute(
        "UPDATE chunks SET text = CAST(x'e5ff41' AS TEXT) || text WHERE text LIKE ?",
        (f"%{unique(3)}%",),
    )
    conn.commit()
    conn.close()
    out = subprocess.run(
        [CLAWKB, "--kb", str(home), "search", unique(3)], capture_output=True, text=True
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "doctor" in out.stderr
    report = run_doctor(home)
    assert not report.healthy and "not UTF-8" in report.findings[0].message
