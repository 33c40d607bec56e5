"""SIGKILL during `reindex`, `embed` and a segment merge: the KB stays correct (issue 9).

(SIGKILL during `index` is covered by tests/test_crash.py.)
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from clawkb.kb import KnowledgeBase
from clawkb.maintenance.doctor import run_doctor
from safety_helpers import indexed_kb, kill_when, unique

HERE = Path(__file__).parent
CLAWKB = str(Path(sys.executable).parent / "clawkb")


def _all_found(home: Path, ids: list[int]) -> None:
    with KnowledgeBase.open(home) as kb:
        for i in ids[::7]:
            hits = kb.search(unique(i), limit=3, mode="lexical").hits
            assert hits and hits[0].anchor.path.endswith(f"doc{i:03d}.md"), i


def test_sigkill_during_reindex_keeps_the_published_index(tmp_path: Path) -> None:
    home, ids = indexed_kb(tmp_path, 150)
    manifest = (home / "index" / "lexical" / "manifest.json").read_text()
    proc = subprocess.Popen([CLAWKB, "--kb", str(home), "reindex"])
    kill_when(proc, lambda: any((home / "index").glob("lexical-build-*")), "reindex")
    assert (home / "index" / "lexical" / "manifest.json").read_text() == manifest
    _all_found(home, ids)
    assert run_doctor(home).healthy
    again = subprocess.run([CLAWKB, "--kb", str(home), "reindex"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert not list((home / "index").glob("lexical-build-*"))  # the killed build is gone
    _all_found(home, ids)


def test_sigkill_during_embed_resumes(tmp_path: Path) -> None:
    pytest.importorskip("static_model")
    home, ids = indexed_kb(tmp_path, 20, "embedding: static\n")
    gate = tmp_path / "never"  # the worker's second batch waits forever
    proc = subprocess.Popen([sys.executable, str(HERE / "embed_worker.py"), str(home), str(gate)])
    with KnowledgeBase.open(home) as kb:

        def first_batch() -> bool:
            return bool(kb.conn.execute("SELECT COUNT(*) FROM chunk_vectors").fetchone()[0])

        kill_when(proc, first_batch, "embed")
        chunks = kb.repo.counts()["chunks"]
    out = subprocess.run(
        [CLAWKB, "--kb", str(home), "embed", "--json"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert f'"total": {chunks}' in out.stdout
    assert run_doctor(home).healthy
    _all_found(home, ids)


MERGER = """
import sys, time
import clawkb.index.lexical as lexical
from clawkb.kb import KnowledgeBase

real = lexical.merge_segments
def slow_merge(group, folder):
    real(group, folder)
    print("merged", flush=True)
    time.sleep(60)  # killed here: the merged segment exists, nothing published it
lexical.merge_segments = slow_merge
with KnowledgeBase.open(sys.argv[1]) as kb, kb.writer():
    kb.lexical.merge()
"""


def test_sigkill_during_merge_leaves_a_correct_index(tmp_path: Path) -> None:
    home, ids = indexed_kb(tmp_path, 30)
    with KnowledgeBase.open(home) as kb:  # several segments to merge (three: a fourth
        for k in range(2):  # small one would start the floor tier's merge on the write)
            (tmp_path / "notes" / f"extra{k}.md").write_text(f"# extra {k}\n\nmore words\n")
            kb.index([tmp_path / "notes"])
        assert len(kb.lexical.segments) > 1
    with subprocess.Popen(
        [sys.executable, "-c", MERGER, str(home)], stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "merged"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    _all_found(home, ids)
    report = run_doctor(home)
    assert report.healthy, [f.line() for f in report.findings]
    with KnowledgeBase.open(home) as kb, kb.writer():  # the next writer tidies up
        pass
    names = {p.name for p in (home / "index" / "lexical").iterdir()}
    with KnowledgeBase.open(home) as kb:
        assert {s.name for s in kb.lexical.segments} <= names
        assert len([n for n in names if n.startswith("seg-")]) == len(kb.lexical.segments)


REINDEXER = """
import sys, time
from pathlib import Path
import clawkb.ingest.reindex as reindex
from clawkb.kb import KnowledgeBase

real = reindex.build_detached
def paused(*args, **kwargs):
    build = real(*args, **kwargs)
    print("built", flush=True)
    while not Path(sys.argv[2]).exists():  # the index is built, not yet switched to
        time.sleep(0.02)
    return build
reindex.build_detached = paused
with KnowledgeBase.open(sys.argv[1]) as kb:
    print(kb.reindex(), flush=True)
"""


def test_other_writers_run_while_reindex_builds(tmp_path: Path) -> None:
    home, ids = indexed_kb(tmp_path, 20)
    gate = tmp_path / "go"
    with subprocess.Popen(
        [sys.executable, "-c", REINDEXER, str(home), str(gate)], stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        try:
            assert proc.stdout.readline().strip() == "built"
            mem = subprocess.run(
                [CLAWKB, "--kb", str(home), "memory", "store", "written during reindex"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert proc.poll() is None  # reindex is still paused before its switch
        finally:
            gate.touch()
        out = proc.stdout.read()
        assert proc.wait(timeout=60) == 0
    assert mem.returncode == 0, mem.stderr
    assert int(out.strip()) >= len(ids)
    with KnowledgeBase.open(home) as kb:  # the memory written meanwhile is in the new index
        assert kb.memory.recall("written during reindex").hits
    _all_found(home, ids)
