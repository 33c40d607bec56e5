"""All four plugin kinds come through entry points; `clawkb plugins` lists them with origin."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clawkb.embed.base import get_embedder
from clawkb.errors import ConfigError
from clawkb.llm import LLMSettings, OpenAIChatClient, make_client
from clawkb.plugins import GROUPS, list_plugins
from clawkb.retrieve.rerank import DenseRescorer, make_reranker
from plugin_helpers import clawkb, install_slow_embedder


def test_builtins_are_registered_like_plugins() -> None:
    found = {(p.group, p.name): p.origin for p in list_plugins()}
    for key in [
        ("clawkb.parsers", "markdown"),
        ("clawkb.embedders", "e5-small"),
        ("clawkb.embedders", "static"),
        ("clawkb.embedders", "openai"),
        ("clawkb.rerankers", "dense"),
        ("clawkb.rerankers", "endpoint"),
        ("clawkb.rerankers", "onnx"),
        ("clawkb.llm_clients", "openai"),
        ("clawkb.llm_clients", "llama-cpp"),
    ]:
        assert found[key] == "built-in", key


def test_built_ins_load_through_their_entry_points() -> None:
    emb = get_embedder("static")
    assert emb.embed_query("uart").shape == (emb.dim,)
    assert isinstance(make_reranker("dense", {}, emb), DenseRescorer)
    client = make_client(LLMSettings(base_url="http://127.0.0.1:9/v1"))
    assert isinstance(client, OpenAIChatClient)
    assert make_client(LLMSettings()) is None
    with pytest.raises(ConfigError, match=r"unknown embedder 'nope'; available: .*static"):
        get_embedder("nope")
    with pytest.raises(ConfigError, match="unknown reranker 'nope'"):
        make_reranker("nope", {}, None)
    with pytest.raises(ConfigError, match=r"unknown LLM client \(llm.client\) 'nope'"):
        make_client(LLMSettings(client="nope"))


def test_plugins_command_lists_a_third_party_embedder_with_its_origin(tmp_path: Path) -> None:
    env = install_slow_embedder(tmp_path / "site")
    res = clawkb(env, "plugins", "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert {r["group"] for r in rows} == set(GROUPS)
    mine = [r for r in rows if r["name"] == "slow-fake"]
    assert mine == [
        {
            "group": "clawkb.embedders",
            "name": "slow-fake",
            "origin": "slowembed 0.1",
            "target": "slowembed:factory",
        }
    ]
    text = clawkb(env, "plugins").stdout
    line = next(ln for ln in text.splitlines() if "slow-fake" in ln)
    assert line.split()[:4] == ["embedders", "slow-fake", "slowembed", "0.1"]
    # the plugin embedder is usable by name, like a built-in
    listed = clawkb(env, "embedders", "--json")
    assert "slow-fake" in json.loads(listed.stdout)


def test_plugin_embedder_is_used_by_embed(tmp_path: Path) -> None:
    env = install_slow_embedder(tmp_path / "site")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# UART\n\nThe console runs at 115200 baud.\n", encoding="utf-8")
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "config.yaml").write_text(
        "embedding:\n  model: slow-fake\n  options: {delay: 0}\n", encoding="utf-8"
    )
    assert clawkb(env, "--kb", str(kb), "index", str(docs)).returncode == 0
    res = clawkb(env, "--kb", str(kb), "embed", "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["model"].startswith("slow-fake") and report["embedded"] == 1
    assert np.isfinite(report["seconds"])


RERANKER = """
import numpy as np


class ByLength:
    name = "by-length"

    def score(self, query, texts):
        return np.asarray([len(t) for t in texts], np.float32)  # longest first


def factory(options, embedder):
    return ByLength()
"""


def test_plugin_reranker_is_accepted_by_search(tmp_path: Path) -> None:
    from plugin_helpers import install_dist

    env = install_dist(
        tmp_path / "site",
        "lenrank",
        "1.0",
        {"lenrank": RERANKER},
        "[clawkb.rerankers]\nby-length = lenrank:factory\n",
    )
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "long.md").write_text(
        "# Console\n\nThe console UART runs at 115200 baud " + "and more words " * 40 + "\n"
    )
    (docs / "short.md").write_text("# UART\n\nconsole UART 115200\n")
    kb = str(tmp_path / "kb")
    assert clawkb(env, "--kb", kb, "index", str(docs)).returncode == 0
    plain = clawkb(env, "--kb", kb, "search", "console UART", "--json")
    assert json.loads(plain.stdout)["hits"][0]["path"].endswith("short.md")
    res = clawkb(env, "--kb", kb, "search", "console UART", "--rerank", "by-length", "--json")
    assert res.returncode == 0, res.stderr
    paths = [h["path"] for h in json.loads(res.stdout)["hits"]]
    assert paths[0].endswith("long.md")  # the plugin's order, not BM25's
    listed = {
        (r["group"], r["name"]): r["origin"]
        for r in json.loads(clawkb(env, "plugins", "--json").stdout)
    }
    assert listed[("clawkb.rerankers", "by-length")] == "lenrank 1.0"
    bad = clawkb(env, "--kb", kb, "search", "console", "--rerank", "nope")
    assert bad.returncode == 2 and "rerank must be one of by-length, dense" in bad.stderr

    from server_helpers import serving  # the HTTP API takes the same choices as the CLI

    with serving(Path(kb), env=env) as srv:
        r = srv.get("/api/v1/search", params={"q": "console UART", "rerank": "by-length"})
        assert r.status_code == 200, r.text
        assert r.json()["hits"][0]["path"].endswith("long.md")
        r = srv.get("/api/v1/search", params={"q": "console", "rerank": "nope"})
        assert r.status_code == 400 and "rerank must be one of by-length, dense" in r.text


def test_plugin_names_are_read_again_when_a_distribution_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Names are kept between calls (a server checks every request's options), and a
    distribution installed into a folder on sys.path afterwards is still seen."""
    from clawkb import plugins

    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    reads: list[str] = []
    real = plugins.entry_points

    def counted(**kw: str) -> object:
        reads.append(kw["group"])
        return real(**kw)

    monkeypatch.setattr(plugins, "entry_points", counted)
    monkeypatch.setattr(plugins, "RECHECK_S", 0.0)  # look at sys.path on every call
    before = plugins.names("clawkb.rerankers")
    assert "late-reranker" not in before
    assert plugins.names("clawkb.rerankers") == before
    assert reads == ["clawkb.rerankers"]  # the second call read no metadata
    info = site / "late_reranker-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: late-reranker\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[clawkb.rerankers]\nlate-reranker = late:make\n")
    assert "late-reranker" in plugins.names("clawkb.rerankers")
    assert len(reads) == 2
