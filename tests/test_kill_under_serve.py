"""SIGKILL during `embed` and `reindex` while `clawkb serve` answers searches (issue 20).

A real server with client threads searching the whole time; the job runs in its
own process and is killed mid-way. Every search answers 200 with the right
file, before, during and after; the server keeps serving; a rerun of the job
finishes and `doctor` finds the KB healthy.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from clawkb.kb import KnowledgeBase
from clawkb.maintenance.doctor import run_doctor
from safety_helpers import indexed_kb, kill_when, unique
from server_helpers import serving

HERE = Path(__file__).parent
CLAWKB = str(Path(sys.executable).parent / "clawkb")


@contextmanager
def _clients(url: str, ids: list[int], n: int = 3) -> Iterator[dict[str, list[str]]]:
    """``n`` threads searching until the block ends; what went wrong, by kind."""
    out: dict[str, list[str]] = {"ok": [], "bad": []}
    stop = threading.Event()

    def client() -> None:
        rng = random.Random()
        with httpx.Client(base_url=url, timeout=30, trust_env=False) as http:
            while not stop.is_set():
                i = rng.choice(ids)
                r = http.get(
                    "/api/v1/search", params={"q": unique(i), "limit": 3, "mode": "lexical"}
                )
                hits = r.json().get("hits", []) if r.status_code == 200 else []
                if not hits or not hits[0]["path"].endswith(f"doc{i:03d}.md"):
                    out["bad"].append(f"{r.status_code} {unique(i)}: {r.text[:200]}")
                else:
                    out["ok"].append("")
                time.sleep(0.01)  # the jobs need the CPU too

    threads = [threading.Thread(target=client) for _ in range(n)]
    for t in threads:
        t.start()
    try:
        yield out
    finally:
        stop.set()
        for t in threads:
            t.join(60)


def test_sigkill_during_reindex_under_serve(tmp_path: Path) -> None:
    home, ids = indexed_kb(tmp_path, 150)
    with serving(home) as server, _clients(server.url, ids) as seen:
        time.sleep(0.3)
        proc = subprocess.Popen([CLAWKB, "--kb", str(home), "reindex"])
        kill_when(proc, lambda: any((home / "index").glob("lexical-build-*")), "reindex")
        time.sleep(0.3)
        again = subprocess.run([CLAWKB, "--kb", str(home), "reindex"], capture_output=True)
        assert again.returncode == 0, again.stderr
        time.sleep(0.3)
        assert server.proc.poll() is None
    assert len(seen["ok"]) > 20 and not seen["bad"], seen["bad"][:5]
    assert not list((home / "index").glob("lexical-build-*"))
    assert run_doctor(home).healthy


def test_sigkill_during_embed_under_serve(tmp_path: Path) -> None:
    pytest.importorskip("static_model")
    home, ids = indexed_kb(tmp_path, 30, "embedding: static\n")
    gate = tmp_path / "never"  # the job's second batch waits forever: killed there
    with serving(home) as server, _clients(server.url, ids) as seen:
        time.sleep(0.3)
        proc = subprocess.Popen([sys.executable, str(HERE / "embed_worker.py"), str(home), gate])
        with KnowledgeBase.open(home) as kb:

            def first_batch() -> bool:
                return bool(kb.conn.execute("SELECT COUNT(*) FROM chunk_vectors").fetchone()[0])

            kill_when(proc, first_batch, "embed")
        time.sleep(0.3)
        out = subprocess.run(
            [CLAWKB, "--kb", str(home), "embed", "--json"], capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        hybrid = server.ok("GET", "/api/v1/search", params={"q": unique(4), "mode": "hybrid"})
        assert hybrid["hits"][0]["path"].endswith("doc004.md") and hybrid["mode"] == "hybrid"
        assert server.proc.poll() is None
    assert len(seen["ok"]) > 20 and not seen["bad"], seen["bad"][:5]
    assert run_doctor(home).healthy
