"""The server's limits on slow, large and odd requests (issue 20, item 7).

Half-open connections and slow headers are closed after ``header_timeout_s``;
a body trickling in at 1 byte/s gets 408; a chunked body over the limit gets
413 (not 400); a 300-character upload name keeps its extension; an overflowing
``since`` and NaN weights or TTLs are one 400 line; a file whose hard link
leads outside is not shown by the viewer.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'clawkb[server]'")

from server_helpers import Server, serving

CONFIG = """server:
  header_timeout_s: 1
  body_timeout_s: 1
  body_min_rate: 1024
  upload_max_bytes: 4096
  max_body_bytes: 65536
"""
CLIENT = {"x-clawkb-request": "1"}


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path, Path]]:
    tmp = tmp_path_factory.mktemp("limits")
    root = tmp / "docs"
    root.mkdir()
    (root / "uart.md").write_text("# UART\n\nThe debug console is UART2 at 1500000 baud.\n")
    (root / "later.md").write_text("# Later\n\nThe platypus note is harmless.\n")
    home = tmp / "kb"
    home.mkdir()
    (home / "config.yaml").write_text(CONFIG)
    from clawkb import KnowledgeBase

    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([root])
    with serving(home, [root], args=["--inbox", str(root / "inbox"), "--no-mcp"]) as s:
        yield s, root, tmp


def connect(s: Server) -> socket.socket:
    host, port = s.url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=15)
    return sock


def closed_within(sock: socket.socket, seconds: float) -> bytes | None:
    """What the server sent before closing, or None if it kept the socket open."""
    sock.settimeout(seconds)
    got = b""
    try:
        while chunk := sock.recv(4096):
            got += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return got


def _closes_half_open_and_slow_headers(s: Server) -> None:
    idle = connect(s)  # connects, never sends a byte
    slow = connect(s)
    slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # headers never finish
    try:
        assert closed_within(idle, 15) == b""
        assert closed_within(slow, 15) is not None
    finally:
        idle.close()
        slow.close()
    assert s.get("/healthz").status_code == 200  # the server itself is fine


def test_half_open_and_slow_header_connections_are_closed(srv: tuple[Server, Path, Path]) -> None:
    _closes_half_open_and_slow_headers(srv[0])


def test_a_trickling_body_gets_408(srv: tuple[Server, Path, Path]) -> None:
    s, _, _ = srv
    sock = connect(s)
    body = b'{"text": "' + b"a" * 200 + b'"}'
    sock.sendall(
        b"POST /api/v1/memory HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    answer = b""
    sock.settimeout(0.2)
    try:
        for i in range(len(body)):  # 5 bytes a second
            try:
                sock.sendall(body[i : i + 1])
            except OSError:
                break
            try:
                answer += sock.recv(4096)
            except TimeoutError:
                continue
            if answer:
                break
        assert answer.startswith(b"HTTP/1.1 408"), answer
        sock.settimeout(5)
        while b"\r\n\r\n" not in answer or b"}" not in answer.split(b"\r\n\r\n", 1)[1]:
            more = sock.recv(4096)  # the body may come in a second packet
            if not more:
                break
            answer += more
        assert b'"code":"timeout"' in answer.replace(b" ", b"")
    finally:
        sock.close()


def chunks(total: int, size: int = 8192) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        yield b"x" * min(size, total - sent)
        sent += size


def test_a_chunked_body_over_the_limit_is_413(srv: tuple[Server, Path, Path]) -> None:
    s, root, _ = srv
    r = s.post(
        "/api/v1/memory", content=chunks(200_000), headers={"content-type": "application/json"}
    )
    assert r.status_code == 413 and r.json()["code"] == "too_large", r.text
    boundary = b"----b"
    head = (
        b"--" + boundary + b'\r\ncontent-disposition: form-data; name="file"; filename="big.md"\r\n'
        b"content-type: text/markdown\r\n\r\n"
    )

    def multipart() -> Iterator[bytes]:
        yield head
        yield from chunks(200_000)
        yield b"\r\n--" + boundary + b"--\r\n"

    r = s.post(
        "/api/v1/upload",
        content=multipart(),
        headers={"content-type": "multipart/form-data; boundary=----b", **CLIENT},
    )
    assert r.status_code == 413, r.text
    assert not (root / "inbox").exists() or not list((root / "inbox").glob("big*"))


def test_a_long_upload_name_keeps_its_extension(srv: tuple[Server, Path, Path]) -> None:
    s, _, _ = srv
    for name in ("a" * 296 + ".md", "说明" * 150 + ".md"):
        files = {"file": (name, b"# Long\n\nThe long-named note mentions the axolotl.\n")}
        out = s.ok("POST", "/api/v1/upload", files=files, headers=CLIENT)
        saved = Path(out["path"])
        assert saved.suffix == ".md" and len(saved.name.encode()) <= 200, saved.name
        assert saved.is_file() and out["report"]["added"] == 1
    # A long name with a refused type is still refused by its real extension.
    r = s.post("/api/v1/upload", files={"file": ("b" * 296 + ".exe", b"MZ")}, headers=CLIENT)
    assert r.status_code == 400 and ".exe" in r.json()["message"]


def test_overflowing_since_and_nan_values_are_400(srv: tuple[Server, Path, Path]) -> None:
    s, _, _ = srv
    for params in (
        {"q": "UART", "since": "99999999d"},
        {"q": "UART", "mode": "lexical", "w_lexical": "nan"},
        {"q": "UART", "mode": "lexical", "w_dense": "inf"},
    ):
        r = s.get("/api/v1/search", params=params)
        assert r.status_code == 400 and r.json()["code"] == "bad_request", (params, r.text)
    assert s.get("/api/v1/search", params={"q": "UART", "since": "999y"}).status_code == 200
    for ttl in ("NaN", "Infinity", "1e400"):
        body = '{"text": "a memory with a broken ttl", "ttl": ' + ttl + "}"
        r = s.post("/api/v1/memory", content=body, headers={"content-type": "application/json"})
        assert r.status_code in (400, 422), (ttl, r.text)
    r = s.post("/api/v1/memory", json={"text": "a memory with a string ttl", "ttl": "99999999d"})
    assert r.status_code == 400, r.text


def test_viewer_does_not_follow_a_hard_link_out(srv: tuple[Server, Path, Path]) -> None:
    s, root, tmp = srv
    hits = s.ok("GET", "/api/v1/search", params={"q": "platypus"})["hits"]
    anchor = hits[0]["anchor"]
    secret = tmp / "secret.md"
    secret.write_text("# Secret\n\nThe platypus password is hunter2.\n")
    later = root / "later.md"
    later.unlink()
    os.link(secret, later)  # the indexed name now reaches a file outside the root
    time.sleep(0.01)
    view = s.ok("GET", f"/api/v1/source/{anchor}")
    assert "hunter2" not in str(view), view
    assert "hard link" in view["note"]


def test_both_parsers_close_a_half_open_connection(tmp_path: Path) -> None:
    """The header deadline holds with the pure-Python parser too (``CLAWKB_HTTP=h11``),
    and httptools is the one used when it is installed."""
    from clawkb.server.protocol import protocol_class

    httptools = pytest.importorskip("httptools")
    assert any(c.__name__ == "HttpToolsProtocol" for c in protocol_class(1.0).__mro__), httptools
    home = tmp_path / "kb"
    home.mkdir()
    (home / "config.yaml").write_text(CONFIG)
    from clawkb import KnowledgeBase

    with KnowledgeBase.open(home, create=True):
        pass
    with serving(home, args=["--no-mcp"], env={"CLAWKB_HTTP": "h11"}) as s:
        _closes_half_open_and_slow_headers(s)
