"""Auth, Host check, CORS, rate limit and MCP over `clawkb serve` and `clawkb mcp --http`."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'clawkb[server]'")
pytest.importorskip("mcp", reason="needs the mcp extra: pip install 'clawkb[mcp]'")

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from server_helpers import CLAWKB, Server, make_kb, serving

TOKEN = "s3cret-token-for-tests"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("auth")
    home, root, _ = make_kb(tmp)
    (home / "config.yaml").write_text("server:\n  ask_per_minute: 2\n", encoding="utf-8")
    return home, root


@pytest.fixture(scope="module")
def srv(home: tuple[Path, Path]) -> Iterator[Server]:
    with serving(home[0], [home[1]], token=TOKEN) as s:
        yield s


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CLAWKB_")}


def test_token_guards_api_metrics_and_mcp(srv: Server) -> None:
    bare = httpx.Client(base_url=srv.url, trust_env=False)
    for path in ("/api/v1/status", "/metrics", "/api/v1/openapi.json"):
        r = bare.get(path)
        assert r.status_code == 401 and r.json()["code"] == "unauthorized", path
        assert r.headers["www-authenticate"] == "Bearer"
    wrong = bare.get("/api/v1/status", headers={"authorization": "Bearer " + TOKEN[:-1] + "x"})
    assert wrong.status_code == 401
    assert bare.post("/mcp", json={}).status_code == 401
    # the page and the probes load without a token: the page asks for it
    assert bare.get("/").status_code == 200 and bare.get("/healthz").status_code == 200
    assert srv.ok("GET", "/api/v1/status")["server"]["auth"] is True
    bare.close()


def test_host_header_and_cors(srv: Server) -> None:
    r = srv.get("/healthz", headers={"host": "evil.example:3000"})
    assert r.status_code == 421 and r.json()["code"] == "bad_host"
    assert srv.get("/healthz", headers={"host": "localhost"}).status_code == 200
    r = srv.get("/api/v1/status", headers={"origin": "http://evil.example"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


def test_ask_is_rate_limited_per_client(srv: Server) -> None:
    q = {"question": "What baud rate does the UART2 debug console use?", "no_llm": True}
    assert srv.post("/api/v1/ask", json=q).status_code == 200
    assert srv.post("/api/v1/ask", json=q).status_code == 200
    r = srv.post("/api/v1/ask", json=q)
    assert r.status_code == 429 and r.json()["code"] == "rate_limited"
    assert int(r.headers["retry-after"]) >= 1
    assert srv.get("/api/v1/search", params={"q": "UART2"}).status_code == 200  # search is not


def test_official_mcp_client_over_serve(srv: Server) -> None:
    async def main() -> None:
        http = create_mcp_http_client(headers={"authorization": f"Bearer {TOKEN}"})
        async with http, Client(streamable_http_client(f"{srv.url}/mcp", http_client=http)) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"search", "ask", "memory_store"} <= names
            res = await c.call_tool("search", {"query": "differential 阻抗", "limit": 2})
            assert not res.is_error
            assert res.structured_content["hits"][0]["path"].endswith("layout/ddr.md")

    anyio.run(main)


def test_non_loopback_bind_needs_a_token(home: tuple[Path, Path]) -> None:
    for cmd in (
        ["serve", "--host", "0.0.0.0", "--port", "0"],
        ["mcp", "--http", "--host", "0.0.0.0"],
    ):
        out = subprocess.run(
            [CLAWKB, "--kb", str(home[0]), *cmd],
            capture_output=True,
            text=True,
            timeout=60,
            env=_env(),
        )
        assert out.returncode == 2, out
        assert "give a token with --token or CLAWKB_TOKEN" in out.stderr


def test_mcp_http_prints_its_url_and_health(home: tuple[Path, Path]) -> None:
    proc = subprocess.Popen(
        [CLAWKB, "--kb", str(home[0]), "mcp", "--http", "--port", "0", "--token", TOKEN],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.match(r"MCP on (http://127\.0\.0\.1:\d+)/mcp", line)
        assert m, line
        base = m.group(1)
        deadline = time.monotonic() + 10
        while True:
            try:
                r = httpx.get(base + "/health", trust_env=False)
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert r.status_code == 200 and r.json() == {"status": "ok"}
        assert httpx.post(base + "/mcp", json={}, trust_env=False).status_code == 401
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        if proc.stdout:
            proc.stdout.close()
