"""`clawkb serve --workers 2` on loopback: one port, two processes, one KB.

Every response names the worker that answered (``x-clawkb-worker``); each
request below goes out on a fresh connection, so the kernel hands it to either
worker, and a check is repeated until both have answered. What one worker
writes or keeps (an indexed file, a conversation, a client's question budget,
the metrics) is seen through the other; a dead worker is replaced; a parent
killed outright leaves no process behind.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'clawkb[server]'")

from server_helpers import Server, make_kb, poll, serving

WORKERS = {"0", "1"}


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    home, root, _ = make_kb(tmp_path_factory.mktemp("workers"))
    (home / "config.yaml").write_text("server:\n  ask_per_minute: 3\n", encoding="utf-8")
    return home, root


@pytest.fixture(scope="module")
def srv(kb: tuple[Path, Path]) -> Iterator[Server]:
    with serving(kb[0], [kb[1]], args=["--workers", "2"]) as server:
        yield server
        tree = _descendants(server.proc.pid)
    # `serving` ended it with SIGTERM: the parent stopped its workers and the writer
    assert server.proc.returncode == 0 and tree
    assert not [p for p in tree if _alive(p)]


def fresh(
    server: Server, method: str, path: str, *, source: str = "127.0.0.1", **kw: Any
) -> httpx.Response:
    """One request on a connection of its own (either worker may accept it), sent from
    loopback address ``source`` (the question budget is per client address)."""
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(
        base_url=server.url, timeout=30, trust_env=False, transport=transport
    ) as http:
        return http.request(method, path, headers={"connection": "close"}, **kw)


def until_both(
    call: Callable[[], httpx.Response], tries: int = 400
) -> dict[str, list[httpx.Response]]:
    """Call until each worker has answered at least once; the answers by worker."""
    seen: dict[str, list[httpx.Response]] = {}
    for _ in range(tries):
        r = call()
        seen.setdefault(r.headers["x-clawkb-worker"], []).append(r)
        if set(seen) >= WORKERS:
            return seen
    raise AssertionError(f"only workers {sorted(seen)} answered in {tries} requests")


def test_a_write_through_one_worker_is_searched_by_both(srv: Server, kb: tuple[Path, Path]) -> None:
    note = kb[1] / "late.md"
    note.write_text("# Late\n\nThe quibblezorp relay sits on header J9.\n", encoding="utf-8")
    wrote = fresh(srv, "POST", "/api/v1/index", json={"path": str(note)})
    assert wrote.status_code == 200, wrote.text
    answers = until_both(lambda: fresh(srv, "GET", "/api/v1/search", params={"q": "quibblezorp"}))
    for worker, rs in answers.items():
        for r in rs:
            hits = r.json()["hits"]
            assert hits and hits[0]["path"].endswith("late.md"), (worker, r.text[:300])
    status = fresh(srv, "GET", "/api/v1/status").json()["server"]
    assert status["workers"] == 2 and status["worker"] in (0, 1)
    assert not [ln for ln in srv.lines if "other threads run" in ln]  # forked thread-free


def test_a_conversation_continues_on_the_other_worker(srv: Server) -> None:
    chat = {"source": "127.0.0.2"}  # its own question budget: the next test spends 127.0.0.1's
    first = fresh(srv, "POST", "/api/v1/chat", json={"question": "What is UART2?", "no_llm": True},
                  **chat)  # fmt: skip
    assert first.status_code == 200, first.text
    cid, started_on = first.json()["conversation"], first.headers["x-clawkb-worker"]
    turn, other = 1, None
    for _ in range(200):  # follow-ups until one is answered by the other worker
        r = fresh(srv, "POST", "/api/v1/chat",
                  json={"question": "and its baud rate?", "conversation": cid, "no_llm": True},
                  **chat)  # fmt: skip
        if r.status_code == 429:  # the question budget (3 a minute) is shared: wait for a token
            time.sleep(float(r.headers["retry-after"]))
            continue
        assert r.status_code == 200, r.text
        turn += 1
        assert r.json()["turn"] == turn  # every earlier turn is known, whichever worker kept it
        if r.headers["x-clawkb-worker"] != started_on:
            other = r
            break
    assert other is not None, "every follow-up went to the worker that started the talk"
    assert "UART2" in other.json()["standalone"]  # rewritten with the first worker's turn


def test_the_question_budget_is_one_for_all_workers(srv: Server) -> None:
    q = {"question": "What baud rate does the UART2 debug console use?", "no_llm": True}
    t0 = time.monotonic()
    answers = until_both(lambda: fresh(srv, "POST", "/api/v1/ask", json=q))
    rs = [r for each in answers.values() for r in each]
    while len(rs) < 8:
        rs.append(fresh(srv, "POST", "/api/v1/ask", json=q))
    allowed = 3 + (time.monotonic() - t0) / 20 + 1  # the bucket, what refilled, rounding
    ok = [r for r in rs if r.status_code == 200]
    assert 1 <= len(ok) <= int(allowed), [(r.status_code, r.headers["x-clawkb-worker"]) for r in rs]
    assert all(r.status_code in (200, 429) for r in rs)
    assert {r.headers["x-clawkb-worker"] for r in rs if r.status_code == 429}


def _writers(server: Server) -> set[int]:
    """The writer process each worker reports in its status."""
    answers = until_both(lambda: fresh(server, "GET", "/api/v1/status"))
    return {r.json()["server"]["writer"]["process"] for rs in answers.values() for r in rs}


def test_one_writer_process_serves_both_workers(srv: Server, kb: tuple[Path, Path]) -> None:
    note = kb[1] / "writer.md"
    note.write_text("# Writer\n\nThe plonkwise gauge is on J2.\n", encoding="utf-8")
    index = lambda: fresh(srv, "POST", "/api/v1/index", json={"path": str(note)})  # noqa: E731
    assert all(r.status_code == 200 for rs in until_both(index).values() for r in rs)
    (writer,) = _writers(srv)  # both workers' writes went to one process
    assert writer not in (None, srv.proc.pid)
    assert writer in _descendants(srv.proc.pid)
    os.kill(writer, signal.SIGKILL)  # the parent starts another; a cut-off job fails clearly
    poll(lambda: any(f"shared writer (pid {writer}) ended" in ln for ln in srv.lines), 30, 0.05)
    for _ in range(2):  # a worker whose connection died fails one job with 503, then reconnects
        for rs in until_both(index).values():
            for r in rs:
                assert r.status_code == 200 or r.json()["code"] == "writer_died", r.text
    assert all(r.status_code == 200 for rs in until_both(index).values() for r in rs)
    (again,) = _writers(srv)
    assert again not in (None, writer)


def _searches_counted(text: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith("clawkb_http_requests_total{") and 'endpoint="/api/v1/search"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_metrics_count_the_requests_of_every_worker(srv: Server) -> None:
    before = _searches_counted(fresh(srv, "GET", "/metrics").text)
    answers = until_both(lambda: fresh(srv, "GET", "/api/v1/search", params={"q": "DDR4"}))
    done = sum(len(rs) for rs in answers.values())
    scrapes = until_both(lambda: fresh(srv, "GET", "/metrics"))
    for rs in scrapes.values():  # either worker's scrape counts both workers' searches
        assert _searches_counted(rs[-1].text) == before + done
    assert "clawkb_chunks " in scrapes["0"][-1].text


def test_the_official_mcp_client_works_on_either_worker(srv: Server) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    seen: set[str] = set()

    async def note(response: httpx.Response) -> None:
        seen.add(response.headers.get("x-clawkb-worker", "?"))

    async def session() -> None:
        # a new connection for each request: a session's calls spread over the workers
        http = httpx.AsyncClient(
            headers={"connection": "close"}, event_hooks={"response": [note]}, timeout=30,
            trust_env=False,
        )  # fmt: skip
        async with http, Client(streamable_http_client(f"{srv.url}/mcp", http_client=http)) as c:
            for _ in range(3):
                names = {t.name for t in (await c.list_tools()).tools}
                assert {"search", "memory_store"} <= names
                res = await c.call_tool("search", {"query": "differential 阻抗", "limit": 2})
                assert not res.is_error, res
                assert res.structured_content["hits"][0]["path"].endswith("layout/ddr.md")

    for _ in range(10):
        anyio.run(session)
        if seen >= WORKERS:
            break
    assert seen >= WORKERS, seen


def _listeners(port: int) -> int:
    """Listening TCP sockets on ``port`` (IPv4 loopback), from /proc/net/tcp."""
    with open("/proc/net/tcp") as fh:
        rows = [line.split() for line in fh.readlines()[1:]]
    return sum(1 for r in rows if r[1].endswith(f":{port:04X}") and r[3] == "0A")


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux /proc")
def test_each_worker_listens_and_keep_alive_clients_are_spread(srv: Server) -> None:
    port = int(srv.url.rsplit(":", 1)[1])
    # one listening socket per worker (the parent only holds the port): with one
    # shared socket, all the keep-alive clients of a burst can land on one worker
    assert _listeners(port) == len(WORKERS)
    clients = [httpx.Client(base_url=srv.url, timeout=30, trust_env=False) for _ in range(16)]
    try:
        answered = {c.get("/healthz").headers["x-clawkb-worker"] for c in clients}
        again = [c.get("/healthz").headers["x-clawkb-worker"] for c in clients[:4]]
    finally:
        for c in clients:
            c.close()
    assert answered == WORKERS  # 16 connections hashed over 2 sockets: both take some
    assert len(again) == 4


def test_keep_alive_connections_end_evenly_split_over_the_workers(srv: Server) -> None:
    """8 keep-alive clients: a worker holding more than half answers with Connection:
    close until the kernel's rehashing of the new connections splits them 4 / 4
    (balance.py). Three fresh batches: an even hash by chance is about 1 in 4 each."""
    import http.client

    host, port = srv.url.removeprefix("http://").rsplit(":", 1)
    for _ in range(3):
        conns = [http.client.HTTPConnection(host, int(port), timeout=30) for _ in range(8)]
        try:
            last: list[str] = []
            for _round in range(40):
                last = []
                for c in conns:  # http.client opens a new connection after a close
                    c.request("GET", "/healthz")
                    r = c.getresponse()
                    r.read()
                    assert r.status == 200
                    last.append(r.getheader("x-clawkb-worker") or "")
            assert sorted(last.count(w) for w in WORKERS) == [4, 4], last
        finally:
            for c in conns:
                c.close()


def test_a_setting_saved_on_one_worker_is_used_by_both(srv: Server) -> None:
    put = fresh(srv, "PUT", "/api/v1/settings", json={"settings": {"retrieval": {"rrf_k": 42}}})
    assert put.status_code == 200, put.text
    time.sleep(1.1)  # a worker looks at config.yaml's time at most once a second
    answers = until_both(lambda: fresh(srv, "GET", "/api/v1/settings"))
    for worker, rs in answers.items():
        got = rs[-1].json()["settings"]["retrieval.rrf_k"]
        assert got["value"] == 42 and got["source"] != "default", (worker, got)


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid``."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    parents[int(name)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        kids = {c for c, pp in parents.items() if pp == p}
        todo += list(kids - out)
        out |= kids
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_dead_worker_is_replaced_and_a_killed_parent_leaves_nothing(
    tmp_path: Path, kb: tuple[Path, Path]
) -> None:
    with serving(kb[0], [kb[1]], args=["--workers", "2", "--no-mcp"]) as server:
        m = next(re.search(r"2 worker processes: (\d+), (\d+)", ln) for ln in server.lines)
        assert m is not None
        first = int(m.group(1))
        os.kill(first, signal.SIGKILL)
        poll(lambda: any(f"(pid {first}) ended" in ln for ln in server.lines), 30, 0.05)
        note = kb[1] / "again.md"
        note.write_text("# Again\n\nThe frobnicast valve is on J4.\n", encoding="utf-8")
        until_both(lambda: fresh(server, "POST", "/api/v1/index", json={"path": str(note)}))
        tree = _descendants(server.proc.pid)
        assert first not in tree and len(tree) == 3, tree  # 2 workers + the shared writer
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait(10)
        poll(lambda: not any(_alive(p) for p in tree), 30, 0.1)
    assert not [p for p in tree if _alive(p)]
