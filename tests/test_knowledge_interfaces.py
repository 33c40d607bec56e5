"""Trust tier and domain arguments of MCP search (real SDK client, real `clawkb mcp`
subprocess) and HTTP search (real `clawkb serve` on loopback); every hit shows both."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="needs the mcp extra: pip install 'clawkb[mcp]'")

from mcp import Client

from server_helpers import serving
from test_knowledge_stages import SOURCES, make_kb, trust_docs
from test_mcp import call, error, session, stdio

CONFIG = SOURCES + "domains:\n  specs: ['manuals/*']\n  chat: ['forum/*']\n"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("kinterfaces")
    trust_docs(tmp / "docs")
    make_kb(tmp, CONFIG).close()
    return tmp / ".clawkb"


def test_mcp_search_takes_min_trust_and_domain(home: Path) -> None:
    async def body(c: Client) -> None:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        props = tools["search"].input_schema["properties"]
        assert {"min_trust", "domain"} <= set(props)
        plain = await call(c, "search", {"query": "what is the watchdog timeout", "limit": 6})
        assert plain["hits"] and all({"trust", "domain"} <= set(h) for h in plain["hits"])
        assert all(h["domain"] in ("specs", "chat") for h in plain["hits"])
        top = await call(
            c, "search", {"query": "watchdog timeout", "limit": 6, "min_trust": "official"}
        )
        assert top["hits"] and {h["trust"] for h in top["hits"]} == {"official"}
        chat = await call(c, "search", {"query": "watchdog timeout", "domain": "chat"})
        assert chat["hits"] and {h["domain"] for h in chat["hits"]} == {"chat"}
        both = await call(c, "search", {"query": "watchdog timeout", "domain": ["chat", "specs"]})
        assert {h["domain"] for h in both["hits"]} == {"chat", "specs"}
        bad = await error(c, "search", {"query": "watchdog", "min_trust": "gospel"})
        assert "min_trust" in bad or "gospel" in bad

    session(stdio(home), body)


def test_http_search_takes_min_trust_and_domain(home: Path) -> None:
    with serving(home) as srv:
        q = {"q": "watchdog timeout", "limit": 6}
        plain = srv.ok("GET", "/api/v1/search", params=q)
        assert all({"trust", "domain"} <= set(h) for h in plain["hits"])
        top = srv.ok("GET", "/api/v1/search", params={**q, "min_trust": "official"})
        assert top["hits"] and {h["trust"] for h in top["hits"]} == {"official"}
        chat = srv.ok("GET", "/api/v1/search", params={**q, "domain": "chat"})
        assert chat["hits"] and {h["domain"] for h in chat["hits"]} == {"chat"}
        r = srv.get("/api/v1/search", params={**q, "min_trust": "gospel"})
        assert r.status_code == 400 and "gospel" in r.text
