"""One table of search options drives the CLI flags, the HTTP query parameters, the MCP
`search` tool's schema and docs/search-options.md: they expose the same options with
the same types, choices and defaults, a plugin reranker is a choice everywhere, and
the docs page is the generated one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import click
import numpy as np
import pytest

from clawkb import KnowledgeBase, plugins
from clawkb.retrieve.options import Option, all_options, markdown_doc

ROOT = Path(__file__).resolve().parents[1]
JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


class CountingReranker:
    """A reranker plugin: scores passages by how often the query's first word occurs."""

    name = "count"

    def score(self, query: str, texts: list[str]) -> list[float]:
        word = query.split()[0].lower()
        return [float(t.lower().count(word)) for t in texts]


def counting(options: Any, embedder: Any) -> CountingReranker:
    return CountingReranker()


@pytest.fixture
def reranker_plugin() -> Iterator[None]:
    plugins.register("clawkb.rerankers", "count", counting)
    try:
        yield
    finally:
        plugins.unregister("clawkb.rerankers", "count")


def _cli_params() -> tuple[dict[str, click.Parameter], dict[str, Any]]:
    """The options of a command with only the table's options, and what it receives
    when none is given."""
    from clawkb.cli.dense import retrieval_options

    got: dict[str, Any] = {}

    @click.command()
    @retrieval_options
    def probe(**kw: Any) -> None:
        got.update(kw)

    probe.main([], standalone_mode=False)
    return {p.name: p for p in probe.params if p.name}, got


def _http_params() -> dict[str, dict[str, Any]]:
    import importlib

    from fastapi import FastAPI

    from clawkb.server import api_read

    importlib.reload(api_read)  # the router is built from the table when the module loads
    app = FastAPI()
    app.include_router(api_read.router)
    spec = app.openapi()
    return {p["name"]: p for p in spec["paths"]["/api/v1/search"]["get"]["parameters"]}


def _mcp_schema(home: Path) -> dict[str, Any]:
    pytest.importorskip("mcp", reason="needs the mcp extra")
    from clawkb.mcp.server import build_server
    from clawkb.mcp.tools import KBTools

    with KnowledgeBase.open(home, create=True) as kb:
        server = build_server(KBTools(kb))

        async def listed() -> Any:
            return await server.list_tools()

        tools = {t.name: t for t in anyio.run(listed)}
    schema: dict[str, Any] = tools["search"].input_schema
    return schema


def _variants(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in schema.get("anyOf", [schema]) if v.get("type") != "null"]


def _json_type(o: Option) -> str:
    return JSON_TYPES[o.kind]


def test_cli_http_and_mcp_expose_the_same_options(tmp_path: Path, reranker_plugin: None) -> None:
    table = all_options()
    names = {o.name for o in table}
    assert {"mode", "rerank", "w_dense", "type", "min_trust", "domain", "route"} <= names
    (cli, given), http = _cli_params(), _http_params()
    mcp = _mcp_schema(tmp_path / "kb")["properties"]
    assert {p for p in cli} == {o.key for o in table}
    assert names <= set(http) and names <= set(mcp)
    for o in table:
        c, h, m = cli[o.key], http[o.name]["schema"], mcp[o.name]
        allowed = o.allowed()
        # CLI: repeatable, flag, choices, default
        assert isinstance(c, click.Option)
        assert c.multiple == o.multiple, o.name
        assert c.is_flag == (o.kind is bool), o.name
        assert bool(c.secondary_opts) == o.tristate, o.name  # --route/--no-route
        assert given[o.key] == o.default, o.name
        if allowed:
            assert "count" in allowed if o.name == "rerank" else True
            assert list(c.type.option.allowed()) == list(allowed), o.name  # type: ignore[attr-defined]
        else:
            assert o.kind is bool or c.type.name == {str: "text", int: "integer",
                                                     float: "float"}[o.kind], o.name  # fmt: skip
        # HTTP: type, items, enum, default
        hv = _variants(h)
        if o.multiple:
            assert [(v["type"], v["items"]) for v in hv] == [("array", {"type": _json_type(o)})]
            assert h.get("default") == [], o.name
        else:
            assert [v["type"] for v in hv] == [_json_type(o)], o.name
            assert h.get("default") == o.default, o.name
        assert h.get("enum") == (list(allowed) if allowed else None), o.name
        # MCP: the same type, enum and default (a repeatable one also takes one string)
        mv = _variants(m)
        if o.multiple:
            kinds = sorted(v["type"] for v in mv)
            assert kinds == ["array", "string"], o.name
            array = next(v for v in mv if v["type"] == "array")
            assert array["items"]["type"] == _json_type(o), o.name
        elif allowed:
            assert [v.get("enum") for v in mv] == [list(allowed)], o.name
        else:
            assert [v["type"] for v in mv] == [_json_type(o)], o.name
        assert m.get("default") == o.default if not o.multiple else m.get("default") is None
        assert m.get("description") == o.help == http[o.name].get("description"), o.name
        assert c.help == o.help, o.name


def test_a_reranker_plugin_reranks_through_the_cli_options_and_mcp(
    tmp_path: Path, reranker_plugin: None
) -> None:
    from clawkb.mcp.tools import KBTools
    from clawkb.retrieve.options import search_kwargs

    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index_texts(
            [
                _record("a.md", "uart uart uart baud rate and the console"),
                _record("b.md", "the uart console, the console, the console again"),
            ]
        )
        plain = kb.search("uart console", mode="lexical", merge=False)
        kwargs = search_kwargs({"rerank": "count", "mode": "lexical", "no_merge": True})
        reranked = kb.search("uart console", **kwargs)
        got = KBTools(kb).search("uart console", 5, (), False, {"rerank": "count",
                                                                "mode": "lexical"})  # fmt: skip
    scores = [h.score for h in reranked.hits]
    assert scores == sorted(scores, reverse=True) and scores[0] == 3.0
    assert any(s["stage"] == "rerank" and "count" in s["note"] for s in reranked.stages)
    assert got["hits"][0]["path"].endswith("a.md")
    assert np.isfinite([h.score for h in plain.hits]).all()
    with pytest.raises(Exception, match="rerank must be one of"):
        search_kwargs({"rerank": "nope"})


def _record(path: str, text: str) -> Any:
    from clawkb.kb import TextRecord

    return TextRecord(path=path, text=text)


def test_docs_table_is_generated_from_the_table() -> None:
    page = (ROOT / "docs" / "search-options.md").read_text(encoding="utf-8")
    assert page == markdown_doc(), (
        "docs/search-options.md is stale: python -m clawkb.retrieve.options > docs/search-options.md"
    )
    for o in all_options():
        assert f"`{o.cli_flag}`" in page and f"`{o.name}`" in page


def test_a_stage_option_cannot_take_a_core_name() -> None:
    class Clash:
        options = (Option("mode", str, "a second --mode"),)

        @staticmethod
        def around(kb: Any, q: Any, run: Any) -> Any:
            return run(q)

    plugins.register("clawkb.query_stages", "clash", Clash)
    try:
        with pytest.raises(Exception, match="query stage 'clash': search option 'mode' is taken"):
            all_options()
    finally:
        plugins.unregister("clawkb.query_stages", "clash")
    assert [o.name for o in all_options()].count("mode") == 1
