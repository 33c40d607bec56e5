"""The server's writes run in a child process (issue 20): a real `clawkb serve` on loopback.

A write through the API is done by the writer process, not the server (the
server's interpreter stays free for searches), and the child holds none of the
server's descriptors but its pipe. A writer process killed mid-job fails that
job with a clear error, searches keep answering from the last good generation
throughout, and the next write starts a new writer process and succeeds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from clawkb.errors import ConfigError
from clawkb.kb import KnowledgeBase
from clawkb.server.runtime import Runtime
from clawkb.server.writer_process import Remote
from server_helpers import make_kb, poll, serving


def _fds(pid: int) -> list[str]:
    """What each open descriptor of ``pid`` points at (beyond stdin/out/err)."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        if int(fd) > 2:
            with contextlib.suppress(OSError):  # closed meanwhile
                out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return out


def test_writes_run_in_a_writer_process_that_survives_being_killed(tmp_path: Path) -> None:
    home, root, _ = make_kb(tmp_path)
    bulk = root / "bulk"
    bulk.mkdir()
    for i in range(250):
        (bulk / f"b{i:03d}.md").write_text(
            f"# Bulk {i}\n\nbulkword{i:03d}q sits in the bulk pile.\n\n" + "filler text. " * 40,
            encoding="utf-8",
        )
    with serving(home, [root]) as server:
        status = server.ok("GET", "/api/v1/status")
        assert status["server"]["writer"]["process"] is None  # started on first use

        note = root / "late.md"
        note.write_text("# Late\n\nThe zorbleflux relay sits on header J9.\n", encoding="utf-8")
        server.ok("POST", "/api/v1/index", json={"path": str(note)})
        writer = server.ok("GET", "/api/v1/status")["server"]["writer"]
        pid = writer["process"]
        assert pid and pid != server.proc.pid and writer["starts"] == 1
        hits = server.ok("GET", "/api/v1/search", params={"q": "zorbleflux"})["hits"]
        assert hits and hits[0]["path"].endswith("late.md")
        # the server's sockets (listening, clients) are not the child's: it has its pipe end
        held = [f for f in _fds(pid) if f.startswith("socket:")]
        server_sockets = {f for f in _fds(server.proc.pid) if f.startswith("socket:")}
        assert len(held) == 1 and len(server_sockets) > 1, (held, server_sockets)
        assert not set(held) & server_sockets

        # searches for indexed content keep answering while the writer is killed mid-job
        bad: list[str] = []
        done = threading.Event()

        def search() -> None:
            with httpx.Client(base_url=server.url, timeout=30, trust_env=False) as http:
                while not done.is_set():
                    r = http.get("/api/v1/search", params={"q": "UART2 baud", "limit": 3})
                    hits = r.json().get("hits", []) if r.status_code == 200 else []
                    if not hits or not hits[0]["path"].endswith("uart.md"):
                        bad.append(f"{r.status_code} {r.text[:200]}")
                    time.sleep(0.02)

        reader = threading.Thread(target=search)
        reader.start()
        answer: dict[str, httpx.Response] = {}
        post = threading.Thread(
            target=lambda: answer.update(r=server.post("/api/v1/index", json={"path": str(bulk)}))
        )
        post.start()
        poll(
            lambda: server.ok("GET", "/api/v1/status")["server"]["writer"]["current"] == "index",
            30,
            0.01,
        )
        os.kill(pid, signal.SIGKILL)
        post.join(60)
        r = answer["r"]
        assert r.status_code == 503 and r.json()["code"] == "writer_died", r.text
        assert "writer process ended" in r.json()["message"] and "signal 9" in r.json()["message"]

        # the next write starts a new writer process and finishes what was cut short
        again = server.ok("POST", "/api/v1/index", json={"path": str(bulk)})
        assert again["report"]["errors"] == []
        writer = server.ok("GET", "/api/v1/status")["server"]["writer"]
        assert writer["starts"] == 2 and writer["process"] not in (None, pid)
        second = writer["process"]
        hits = server.ok("GET", "/api/v1/search", params={"q": "bulkword249q"})["hits"]
        assert hits and hits[0]["path"].endswith("b249.md")
        done.set()
        reader.join(30)
        assert server.proc.poll() is None
    assert not bad, bad[:5]
    assert not Path(f"/proc/{second}").exists()  # a stopped server leaves no writer behind


class _TwoPart(Exception):
    """An exception that does not survive pickling (its constructor needs two arguments)."""

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what}: {why}")


def _job(kb: KnowledgeBase, kind: str) -> object:
    if kind == "config":
        raise ConfigError("notes.md: a bad value")
    if kind == "odd":
        raise _TwoPart("notes.md", "an odd failure")
    return (os.getpid(), kb.status()["chunks"])


def test_writer_process_answers_results_and_errors(tmp_path: Path) -> None:
    home, _, _ = make_kb(tmp_path)
    runtime = Runtime(home)
    try:
        pid, chunks = runtime.submit(Remote(_job, "ok")).result(60)
        assert pid != os.getpid() and pid == runtime.writer_state()["process"] and chunks > 0
        generation = runtime.generation
        with pytest.raises(ConfigError, match=r"notes\.md: a bad value"):
            runtime.submit(Remote(_job, "config")).result(60)
        with pytest.raises(RuntimeError, match=r"_TwoPart: notes\.md: an odd failure"):
            runtime.submit(Remote(_job, "odd")).result(60)
        assert runtime.generation == generation + 2  # each gated job renews the views
        assert runtime.submit(Remote(_job, "ok")).result(60)[0] == pid  # the same process
        assert runtime.writer_state()["starts"] == 1
    finally:
        runtime.close()
    assert not Path(f"/proc/{pid}").exists()
