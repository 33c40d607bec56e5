"""Bad input never stops a run or loses what was indexed before.

Every test indexes a folder holding one bad thing next to a good file, on top of
a KB that already holds an earlier folder, and checks that the good file got in,
the bad one is reported by name, and the earlier content is still searchable.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawkb.cli.main import cli
from clawkb.errors import SchemaTooNewError
from clawkb.ingest.pipeline import IndexReport
from clawkb.kb import KnowledgeBase

VENV_BIN = Path(sys.executable).parent
CLAWKB = str(VENV_BIN / "clawkb")
EARLIER_WORD = "heliotropebasin"
GOOD_WORD = "goodfilemarker"


@pytest.fixture()
def kb_home(tmp_path: Path) -> Path:
    """A KB that already holds one folder (the content that must never be lost)."""
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "old.md").write_text(
        f"# 旧笔记\n\nolder content {EARLIER_WORD} 保留\n", encoding="utf-8"
    )
    home = tmp_path / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        assert kb.index([earlier]).added == 1
    return home


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    d = tmp_path / "incoming"
    d.mkdir()
    (d / "good.md").write_text(f"# Good\n\nA fine file {GOOD_WORD} 正常\n", encoding="utf-8")
    return d


def found(kb: KnowledgeBase, word: str) -> list[str]:
    return [Path(h.anchor.path).name for h in kb.search(word).hits]


def messages(report: IndexReport) -> list[tuple[str, str]]:
    return [*report.errors, *report.skipped_files]


def assert_run_survived(kb: KnowledgeBase) -> None:
    assert found(kb, GOOD_WORD) == ["good.md"]
    assert found(kb, EARLIER_WORD) == ["old.md"]


def index_folder(kb_home: Path, folder: Path) -> IndexReport:
    with KnowledgeBase.open(kb_home) as kb:
        report = kb.index([folder])
        assert_run_survived(kb)
    return report


def test_empty_file_is_indexed_with_no_chunks(kb_home: Path, folder: Path) -> None:
    """Behaviour pinned: an empty file is *indexed* (a document row, zero chunks), not skipped."""
    (folder / "empty.md").write_bytes(b"")
    (folder / "empty.txt").write_bytes(b"")
    rep = index_folder(kb_home, folder)
    assert (rep.added, rep.failed, rep.skipped) == (3, 0, 0)
    with KnowledgeBase.open(kb_home) as kb:
        for name in ("empty.md", "empty.txt"):
            doc = kb.repo.document((folder / name).as_posix())
            assert doc is not None and doc.error is None
            assert kb.repo.chunks_of_doc(doc.id) == []
        # a second run sees them as unchanged, not as new every time
        again = kb.index([folder])
        assert again.unchanged == 3 and again.added == 0


def test_binary_md_and_png_are_skipped_by_name(kb_home: Path, folder: Path) -> None:
    (folder / "fake.md").write_bytes(b"\x00\x01\x02binary\x00" + bytes(range(256)) * 20)
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10" + b"\x00\xff" * 200
    (folder / "image.png").write_bytes(png)
    rep = index_folder(kb_home, folder)
    msgs = dict(messages(rep))
    fake, image = (folder / "fake.md").as_posix(), (folder / "image.png").as_posix()
    assert "binary" in msgs[fake]
    assert "binary" in msgs[image]
    assert rep.added == 1
    with KnowledgeBase.open(kb_home) as kb:
        chunks = kb.conn.execute(
            "SELECT COUNT(*) FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.path IN (?, ?)",
            (fake, image),
        ).fetchone()[0]
        assert chunks == 0


def test_invalid_encoding_bytes_do_not_stop_the_run(kb_home: Path, folder: Path) -> None:
    """Behaviour pinned: stray undecodable bytes inside mostly-ASCII text are decoded by the
    fallback and the file is indexed; its plain words are searchable."""
    (folder / "mojibake.txt").write_bytes(
        b"start \xff\xfe\x80\x81\xc3\x28 middle brokenbytesword end\n"
    )
    rep = index_folder(kb_home, folder)
    assert rep.failed == 0 and rep.added == 2
    with KnowledgeBase.open(kb_home) as kb:
        assert found(kb, "brokenbytesword") == ["mojibake.txt"]


def test_file_over_size_limit_fails_by_name(kb_home: Path, folder: Path) -> None:
    big = folder / "huge.md"
    with open(big, "wb") as fh:  # sparse: no 50 MB of writes
        fh.truncate(50 * 1024 * 1024)
    assert big.stat().st_size == 50 * 1024 * 1024
    t0 = time.perf_counter()
    rep = index_folder(kb_home, folder)
    assert time.perf_counter() - t0 < 10  # the file is never read
    assert rep.failed == 1
    msgs = dict(messages(rep))
    assert "too large" in msgs[big.as_posix()]


def test_deeply_nested_folders_are_reported_and_run_continues(kb_home: Path, folder: Path) -> None:
    deep = folder
    shallow_file = None
    for i in range(80):
        deep = deep / f"n{i}"
        if i == 10:
            shallow_file = deep / "level10.md"
    deep.mkdir(parents=True)
    assert shallow_file is not None
    shallow_file.write_text("level ten tenthlevelword\n", encoding="utf-8")
    (deep / "bottom.md").write_text("bottom abyssword\n", encoding="utf-8")
    rep = index_folder(kb_home, folder)
    assert any("nesting" in reason for _, reason in rep.errors), rep.errors
    with KnowledgeBase.open(kb_home) as kb:
        assert found(kb, "tenthlevelword") == ["level10.md"]
        assert found(kb, "abyssword") == []  # below the depth limit


def test_symlink_loop_is_reported_without_hanging(kb_home: Path, folder: Path) -> None:
    (folder / "loop").mkdir()
    (folder / "loop" / "up").symlink_to("..")
    (folder / "loop" / "self").symlink_to(".")
    (folder / "loop" / "inside.md").write_text("inside loopinsideword\n", encoding="utf-8")
    proc = subprocess.run(
        [CLAWKB, "--kb", str(kb_home), "index", str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "symlink loop" in proc.stderr
    assert "added 2" in proc.stdout
    with KnowledgeBase.open(kb_home) as kb:
        assert_run_survived(kb)
        assert found(kb, "loopinsideword") == ["inside.md"]  # indexed once, not once per loop turn
        assert kb.status()["documents"] == 3


def test_unreadable_file(kb_home: Path, folder: Path) -> None:
    """chmod 000 is not enforced for root. As root we make unreadable things another way:
    a symlink to /proc/self/mem (a regular file whose read at offset 0 fails with EIO in
    any process), and a FIFO given as a folder to index (cannot be listed). A FIFO inside
    a folder must not hang the run either (it is not a regular file, so it is passed over).
    """
    locked = folder / "locked.md"
    locked.write_text("secret lockedword\n", encoding="utf-8")
    locked.chmod(0)
    os.mkfifo(folder / "pipe.md")
    proc_mem = Path("/proc/self/mem")
    if os.geteuid() == 0 and proc_mem.exists():
        (folder / "memory.txt").symlink_to(proc_mem)
        # the link leaves the folder: only followed when the user opts in
        (kb_home / "config.yaml").write_text("follow_symlinks: outside\n", encoding="utf-8")
    proc = subprocess.run(
        [CLAWKB, "--kb", str(kb_home), "index", str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # done, with failures: exit status 3
    assert proc.returncode == (3 if os.geteuid() != 0 or proc_mem.exists() else 0), proc.stderr
    with KnowledgeBase.open(kb_home) as kb:
        assert_run_survived(kb)
        if os.geteuid() != 0:
            assert f"{locked.as_posix()}: cannot read" in proc.stderr
            assert found(kb, "lockedword") == []
        elif proc_mem.exists():
            assert f"{(folder / 'memory.txt').as_posix()}: cannot read" in proc.stderr
        # the FIFO: no hang (timeout above), no document
        assert kb.repo.document((folder / "pipe.md").as_posix()) is None
        # a FIFO given as the folder to index: reported by name, nothing lost
        rep = kb.index([folder / "pipe.md"])
        assert any(
            p == (folder / "pipe.md").as_posix() and "cannot read" in r for p, r in rep.errors
        )
        assert rep.removed == 0
        assert_run_survived(kb)
    locked.chmod(0o644)


def test_schema_from_newer_clawkb_is_refused(kb_home: Path) -> None:
    db_path = kb_home / "clawkb.sqlite"
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            "INSERT INTO migrations (id, name, applied_at)"
            " SELECT MAX(id) + 1, '9999_from_the_future', ? FROM migrations",
            (time.time(),),
        )
    conn.close()
    before = db_path.read_bytes()
    with pytest.raises(SchemaTooNewError) as exc:
        KnowledgeBase.open(kb_home)
    msg = str(exc.value)
    assert "newer clawkb" in msg and "9999_from_the_future" in msg and "upgrade" in msg

    result = CliRunner().invoke(cli, ["--kb", str(kb_home), "search", EARLIER_WORD])
    assert result.exit_code == 2
    err = result.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "newer clawkb" in err[0]
    assert result.stdout == ""
    # refused, never touched: once the future row goes, the old content is all there
    assert db_path.read_bytes() == before
    with sqlite3.connect(db_path) as conn:
        conn.execute("DELETE FROM migrations WHERE name = '9999_from_the_future'")
    conn.close()
    with KnowledgeBase.open(kb_home) as kb:
        assert found(kb, EARLIER_WORD) == ["old.md"]


HOLDER = """
import sys, time
from clawkb.kb import KnowledgeBase
kb = KnowledgeBase.open(sys.argv[1])
with kb.writer(wait=5):
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
kb.close()
"""


def test_second_writer_waits_or_gives_up(kb_home: Path, folder: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(kb_home), "3"], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "locked"
            t0 = time.monotonic()
            proc = subprocess.run(
                [CLAWKB, "--kb", str(kb_home), "index", str(folder), "--wait", "0.5"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert time.monotonic() - t0 < 2.5
            assert proc.returncode != 0
            assert proc.stdout == ""
            errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
            assert len(errors) == 1
            assert "another clawkb process is writing" in errors[0]
            assert holder.poll() is None  # it really was still holding the lock

            proc = subprocess.run(
                [CLAWKB, "--kb", str(kb_home), "index", str(folder), "--wait", "30"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert holder.poll() == 0  # it finished first
            assert proc.returncode == 0, proc.stderr
            assert "added 1" in proc.stdout
        finally:
            if holder.poll() is None:
                holder.kill()
    with KnowledgeBase.open(kb_home) as kb:
        assert_run_survived(kb)


def test_file_that_stops_parsing_keeps_old_chunks(kb_home: Path, folder: Path) -> None:
    flaky = folder / "flaky.md"
    flaky.write_text("# Flaky\n\nfirst version persimmonword\n", encoding="utf-8")
    first = index_folder(kb_home, folder)
    assert first.added == 2
    # now it turns into garbage (and the good file changes in the same run)
    flaky.write_bytes(b"\x00\x00garbage\x00" * 100)
    (folder / "good.md").write_text(
        f"# Good\n\nupdated {GOOD_WORD} 更新 newgoodword\n", encoding="utf-8"
    )
    st = flaky.stat()
    os.utime(flaky, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    rep = index_folder(kb_home, folder)
    assert rep.failed == 1 and rep.updated == 1
    assert flaky.as_posix() in dict(rep.errors)
    with KnowledgeBase.open(kb_home) as kb:
        assert found(kb, "persimmonword") == ["flaky.md"]
        assert found(kb, "newgoodword") == ["good.md"]
        doc = kb.repo.document(flaky.as_posix())
        assert doc is not None and doc.error and "binary" in doc.error
        assert kb.status()["failed"] == 1
        # still failing on the next run: still kept, still reported
        again = kb.index([folder])
        assert again.failed == 1 and again.removed == 0
        assert found(kb, "persimmonword") == ["flaky.md"]
        # fixed: replaced, and the error clears
        flaky.write_text("# Flaky\n\nsecond version quincewood\n", encoding="utf-8")
        fixed = kb.index([folder])
        assert fixed.updated == 1 and fixed.failed == 0
        assert found(kb, "persimmonword") == []
        assert found(kb, "quincewood") == ["flaky.md"]
        assert kb.repo.document(flaky.as_posix()).error is None
