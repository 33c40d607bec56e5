"""Long jobs share the KB: `embed` holds the write lock only per batch (issue 9, defect 5),
and 8 readers + a writer + `embed` run at once without a wrong or empty result."""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clawkb.kb import KnowledgeBase
from safety_helpers import make_corpus, write_doc

pytest.importorskip("static_model")

HERE = Path(__file__).parent
CLAWKB = str(Path(sys.executable).parent / "clawkb")


def _vectors(home: Path) -> int:
    conn = sqlite3.connect(home / "clawkb.sqlite", timeout=30)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM chunk_vectors").fetchone()[0])
    finally:
        conn.close()


def test_other_writers_interleave_with_a_running_embed(tmp_path: Path) -> None:
    make_corpus(tmp_path / "notes", 20)
    home = tmp_path / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([tmp_path / "notes"])
        chunks = kb.repo.counts()["chunks"]
    gate = tmp_path / "go"
    embed = subprocess.Popen(
        [sys.executable, str(HERE / "embed_worker.py"), str(home), str(gate)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while _vectors(home) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)  # the first batch is committed: embed is mid-run
        assert embed.poll() is None
        mem = subprocess.run(
            [CLAWKB, "--kb", str(home), "memory", "store", "the board runs at 3.3 V"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        more = tmp_path / "more"
        more.mkdir()
        write_doc(more, 50, 0, random.Random(1))
        idx = subprocess.run(
            [CLAWKB, "--kb", str(home), "index", str(more), "--wait", "10", "-q"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert embed.poll() is None, "embed finished early: the test proves nothing"
    finally:
        gate.touch()
        out, err = embed.communicate(timeout=120)
    assert mem.returncode == 0, mem.stderr
    assert idx.returncode == 0, idx.stderr
    assert embed.returncode == 0, err
    embedded, total = map(int, out.split())
    assert embedded > 0 and total >= chunks
    with KnowledgeBase.open(home) as kb:
        assert kb.memory.recall("3.3 V").hits
        assert any(h.anchor.path.endswith("doc050.md") for h in kb.search("needle050q").hits)


def test_eight_readers_a_writer_and_embed_at_once(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    ids = make_corpus(notes, 30)
    home = tmp_path / "kb"
    home.mkdir()
    (home / "config.yaml").write_text("embedding: static\n", "utf-8")
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([notes])
    assert subprocess.run([CLAWKB, "--kb", str(home), "embed"], capture_output=True).returncode == 0
    stop = tmp_path / "stop"
    readers = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "safety_helpers.py"),
                str(home),
                "90",
                json.dumps(ids),
                str(stop),
                "0.02",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    rng = random.Random(9)
    try:
        with KnowledgeBase.open(home) as kb:
            for round_ in range(1, 3):
                for i in rng.sample(ids, 6):
                    write_doc(notes, i, round_, rng)
                embed = subprocess.Popen(
                    [CLAWKB, "--kb", str(home), "embed"],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                kb.index([notes], wait=60)  # while embed runs
                if round_ == 2:
                    kb.reindex()
                _, err = embed.communicate(timeout=120)
                assert embed.returncode == 0, err
    finally:
        stop.touch()
    results = []
    for p in readers:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    assert sum(r["done"] for r in results) >= 16, results
    assert sum(r["errors"] for r in results) == 0, results
    assert sum(r["empty"] for r in results) == 0, results


def test_doctor_finds_and_repairs_vectors_that_disagree_with_chunks(tmp_path: Path) -> None:
    from clawkb.maintenance.doctor import run_doctor

    make_corpus(tmp_path / "notes", 6)
    home = tmp_path / "kb"
    home.mkdir()
    (home / "config.yaml").write_text("embedding: static\n", "utf-8")
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([tmp_path / "notes"])
    assert subprocess.run([CLAWKB, "--kb", str(home), "embed"], capture_output=True).returncode == 0
    assert run_doctor(home).healthy
    conn = sqlite3.connect(home / "clawkb.sqlite")
    conn.execute("DELETE FROM vectors WHERE key IN (SELECT key FROM vectors LIMIT 2)")
    conn.commit()
    conn.close()
    found = run_doctor(home)
    assert not found.healthy
    assert "missing vector" in next(f.message for f in found.findings if f.check == "vectors")
    assert run_doctor(home, repair=True).healthy
    out = subprocess.run([CLAWKB, "--kb", str(home), "embed", "--json"], capture_output=True)
    assert out.returncode == 0
    assert run_doctor(home).healthy
