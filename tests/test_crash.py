"""A writer killed with SIGKILL at any moment is repaired by the next run.

A real `clawkb index` subprocess is killed early, midway, and during the final
lexical-index sync (all documents stored, run not finished); a second run then
completes and the store and the index must agree exactly.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from clawkb.kb import KnowledgeBase

CLAWKB = str(Path(sys.executable).parent / "clawkb")
VOCAB = [f"term{i}" for i in range(3000)]
ZH = "电源时钟布局走线阻抗电容电阻信号接地屏蔽调试固件驱动中断寄存器"


def unique_word(i: int) -> str:
    return f"uniq{i:05d}x"


def write_corpus(root: Path, start: int, count: int, rng: random.Random) -> None:
    for i in range(start, start + count):
        d = root / f"group{i % 10}"
        d.mkdir(parents=True, exist_ok=True)
        lines = [f"# Document {i} 文档", ""]
        for s in range(6):
            lines += [f"## Section {s}", ""]
            for p in range(3):
                words = rng.choices(VOCAB, k=40)
                words += [ZH[k : k + 2] for k in rng.choices(range(len(ZH) - 1), k=8)]
                if s == 3 and p == 1:
                    words.append(unique_word(i))
                lines += [" ".join(words) + " commonword", ""]
        ext = ".md" if i % 3 else ".txt"
        (d / f"doc{i:05d}{ext}").write_text("\n".join(lines), encoding="utf-8")


def corpus_files(root: Path) -> dict[str, int]:
    """Absolute path → document number."""
    return {p.as_posix(): int(p.stem[3:]) for p in root.rglob("doc*.*")}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~400 files, grown until a full index run takes more than a second."""
    root = tmp_path_factory.mktemp("corpus")
    rng = random.Random(1234)
    n = 0
    for _ in range(4):
        grow = 400 if n == 0 else n
        write_corpus(root, n, grow, rng)
        n += grow
        probe = tmp_path_factory.mktemp("probe")
        t0 = time.perf_counter()
        proc = subprocess.run(
            [CLAWKB, "--kb", str(probe), "index", str(root)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        took = time.perf_counter() - t0
        assert proc.returncode == 0, proc.stderr
        if took > 1.0:
            break
    assert took > 1.0, f"indexing {n} files took only {took:.2f}s"
    return root


def count_documents(db_path: Path) -> int:
    if not db_path.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=1)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return 0  # not created yet / schema not there yet


@pytest.mark.slow
@pytest.mark.parametrize(
    ("moment", "workers"),
    [("early", "2"), ("middle", "2"), ("final_sync", "2"), ("middle", "1")],
)
def test_sigkill_then_rerun_is_consistent(
    corpus: Path, tmp_path: Path, moment: str, workers: str
) -> None:
    """``workers`` 2: files parsed by ingest workers (they exit when the killed
    writer's pipes close); 1: everything in the indexing process."""
    files = corpus_files(corpus)
    total = len(files)
    home = tmp_path / "kb"
    db_path = home / "clawkb.sqlite"
    threshold = {"early": 1, "middle": total // 2, "final_sync": total}[moment]

    env = {**os.environ, "CLAWKB_INGEST_WORKERS": workers}
    with subprocess.Popen(
        [CLAWKB, "--kb", str(home), "index", str(corpus)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    ) as proc:
        deadline = time.monotonic() + 120
        seen = 0
        while proc.poll() is None and time.monotonic() < deadline:
            seen = count_documents(db_path)
            if seen >= threshold:
                break
            time.sleep(0.002)
        if moment == "final_sync":
            time.sleep(0.1)  # every document is stored; the run is now syncing the index
        alive = proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert alive, f"the run finished before the {moment} kill point (saw {seen} documents)"
    assert proc.returncode == -signal.SIGKILL
    stored = count_documents(db_path)
    if moment == "final_sync":
        assert stored == total
    else:
        assert 0 < stored < total, stored

    rerun = subprocess.run(
        [CLAWKB, "--kb", str(home), "index", str(corpus)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert "interrupted" in rerun.stderr
    assert f"added {total - stored} " in rerun.stdout
    assert "failed 0" in rerun.stdout

    with KnowledgeBase.open(home) as kb:
        conn = kb.conn
        # every file exactly once
        paths = [r[0] for r in conn.execute("SELECT path FROM documents")]
        assert len(paths) == len(set(paths)) == total
        assert set(paths) == set(files)
        # no duplicate anchors, no orphan chunks, no document without chunks
        n_chunks, n_anchors = conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT anchor) FROM chunks"
        ).fetchone()
        assert n_chunks == n_anchors > total
        orphans = conn.execute(
            "SELECT COUNT(*) FROM chunks c LEFT JOIN documents d ON d.id = c.doc_id WHERE d.id IS NULL"
        ).fetchone()[0]
        assert orphans == 0
        empty_docs = conn.execute(
            "SELECT COUNT(*) FROM documents d WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.doc_id = d.id)"
        ).fetchone()[0]
        assert empty_docs == 0
        assert (
            conn.execute("SELECT status FROM runs ORDER BY id DESC LIMIT 1").fetchone()[0] == "done"
        )

        # the lexical index holds exactly the store's chunks, each once
        store_ids = {r[0] for r in conn.execute("SELECT id FROM chunks")}
        live = [s.chunk_ids[s.live.astype(bool)] for s in kb.lexical.segments]
        live_ids = np.concatenate(live) if live else np.empty(0, np.int64)
        assert len(live_ids) == len(set(live_ids.tolist()))
        assert set(live_ids.tolist()) == store_ids
        assert kb.lexical.applied_seq == kb.repo.max_seq()

        # every file is found by its own word, first
        for path, i in files.items():
            res = kb.search(unique_word(i), limit=3)
            assert res.hits, unique_word(i)
            assert res.hits[0].anchor.path == path
        with_word = conn.execute(
            "SELECT COUNT(*) FROM chunks WHERE text LIKE '%commonword%'"
        ).fetchone()[0]
        assert kb.search("commonword", limit=1).matched == with_word > total
