"""Milvus backend, machine to machine: SIGKILL mid-sync, a remote-only KB (CLI, ask,
context, MCP over stdio) and export/import — all on real Milvus Lite files."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import clawkb  # noqa: F401  (before pymilvus: keeps gRPC fork handlers off)

pytest.importorskip("pymilvus", reason="the milvus extra is not installed: pip install '.[milvus]'")

from click.testing import CliRunner

from clawkb.backends.milvus_kb import kb_backend, sync_kb
from clawkb.backends.milvus_schema import close_client, open_collection
from clawkb.backends.milvus_sync import HOLD_PREFIX, remote_chunk_ids, source_id
from clawkb.backends.settings import milvus_settings
from clawkb.cli.main import cli
from clawkb.errors import ClawkbError, IndexError_
from clawkb.kb import KnowledgeBase
from milvus_helpers import make_kb_home, write_corpus

CLAWKB = str(Path(sys.executable).parent / "clawkb")


def _cursor(home: Path, key: str) -> int | None:
    conn = sqlite3.connect(f"file:{home / 'clawkb.sqlite'}?mode=ro", uri=True, timeout=5)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (HOLD_PREFIX + key,)).fetchone()
        return None if row is None else int(row[0])
    finally:
        conn.close()


def test_sync_killed_mid_replay_resumes_to_the_same_collection(tmp_path: Path) -> None:
    db_file = str(tmp_path / "kill.db")
    home = make_kb_home(tmp_path / "kb", db_file, "k", auto_sync=False, batch=3, throttle_ms=25)
    s = milvus_settings({"uri": db_file, "collection": "k"}, None, "test")
    KnowledgeBase.open(home, create=True).close()
    first = subprocess.run([CLAWKB, "--kb", str(home), "sync"], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr  # registers the cursor (log held from here)
    with KnowledgeBase.open(home) as kb:
        kb.index([write_corpus(tmp_path / "docs", extra=40)])
        head = kb.repo.max_seq()
        want = {r[0] for r in kb.conn.execute("SELECT id FROM chunks")}
    assert head > 60
    proc = subprocess.Popen(
        [CLAWKB, "--kb", str(home), "sync"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    seen = 0
    while time.monotonic() < deadline:
        seen = _cursor(home, s.key) or 0
        if 0 < seen < head:
            break
        assert proc.poll() is None, "sync ended before it could be killed"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()  # type: ignore[union-attr]
    proc.stderr.close()  # type: ignore[union-attr]
    assert 0 < seen < head
    with KnowledgeBase.open(home) as kb:
        st = kb.status()["backend"]
        assert not st["synced"] and st["lag_changes"] > 0
        open_collection(s)  # this process's client: load the collection before reading
        partial = remote_chunk_ids(s, source_id(kb))
        assert partial < want  # some, not all, rows made it before the kill
        rep = sync_kb(kb)
        assert not rep.full and 0 < rep.applied <= head - seen + 3
        assert remote_chunk_ids(s, source_id(kb)) == want
        assert kb.status()["backend"]["synced"]
        assert sync_kb(kb).applied == 0
    close_client(s)


@pytest.fixture(scope="module")
def ingest(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An ingesting KB synced into a Lite file, whose client is then closed so other
    processes (a remote-only CLI, an MCP server) can open the file."""
    base = tmp_path_factory.mktemp("remote")
    db_file = str(base / "shared.db")
    home = make_kb_home(base / "kb", db_file, "notes")
    docs = write_corpus(base / "docs", extra=10)
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([docs])
        anchors = {r[0] for r in kb.conn.execute("SELECT anchor FROM chunks")}
        settings = kb_backend(kb)
    remote = base / "remote"
    remote.mkdir()
    (remote / "remote.yaml").write_text(
        yaml.safe_dump(
            {
                "embedding": "static",
                "backend": {"kind": "milvus", "uri": db_file, "collection": "notes"},
            }
        ),
        encoding="utf-8",
    )
    return {"home": home, "remote": remote, "db": db_file, "anchors": anchors, "settings": settings}


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_remote_only_kb_searches_shows_asks_and_gives_context(ingest: dict[str, Any]) -> None:
    remote = str(ingest["remote"])
    assert sorted(p.name for p in ingest["remote"].iterdir()) == ["remote.yaml"]
    res = run("--kb", remote, "search", "USART2 baud 波特率", "--json", "--explain")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["hits"][0]["path"].endswith("uart.md")
    assert data["hits"][0]["anchor"] in ingest["anchors"]
    assert data["hits"][0]["explanation"]["backend"] == "milvus"
    for mode in ("lexical", "dense", "hybrid"):
        out = run("--kb", remote, "search", "0x4001_3000", "--mode", mode, "--json")
        assert out.exit_code == 0, out.output
        assert json.loads(out.stdout)["mode"] in (mode, "lexical")
    top = data["hits"][0]["anchor"]
    shown = run("--kb", remote, "show", top)
    assert shown.exit_code == 0 and "USART2" in shown.output
    ask = run("--kb", remote, "ask", "What is the USART2 baud?", "--json")
    assert ask.exit_code == 0, ask.output
    answer = json.loads(ask.stdout)
    assert answer["mode"] == "extractive" and "115200" in answer["answer"] and answer["passages"]
    ctx = run("--kb", remote, "context", "USART2 TX pin", "--json")
    assert ctx.exit_code == 0, ctx.output
    assert "pin aliases" in " ".join(json.loads(ctx.stdout)["warnings"])
    st = run("--kb", remote, "status", "--json")
    assert json.loads(st.stdout)["backend"]["rows"] == len(ingest["anchors"])
    idx = run("--kb", remote, "index", str(ingest["remote"]))
    assert idx.exit_code == 2 and "read-only" in idx.output
    assert sorted(p.name for p in ingest["remote"].iterdir()) == ["remote.yaml"]
    close_client(ingest["settings"])


def test_remote_only_kb_serves_mcp_over_stdio(ingest: dict[str, Any]) -> None:
    pytest.importorskip("mcp", reason="needs the mcp extra: pip install 'clawkb[mcp]'")
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    close_client(ingest["settings"])  # the server process must own the Lite file
    server = StdioServerParameters(command=CLAWKB, args=["--kb", str(ingest["remote"]), "mcp"])

    async def main() -> None:
        async with Client(server, read_timeout_seconds=60) as c:
            res = await c.call_tool("search", {"query": "CONFIG_SMP v5.15.32", "limit": 3})
            assert not res.is_error, res.content
            hits = res.structured_content["hits"]
            assert hits and hits[0]["path"].endswith("kernel.md")
            got = await c.call_tool("get_chunk", {"anchor": hits[0]["anchor"]})
            assert not got.is_error and "CONFIG_SMP" in got.structured_content["text"]

    anyio.run(main)


def test_export_to_folder_and_import_keeps_anchors_and_vectors(
    ingest: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "dump"
    res = run("--kb", str(ingest["home"]), "export", "--to", str(out), "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["chunks"] == len(ingest["anchors"])
    target = tmp_path / "copy"
    (target).mkdir()
    (target / "config.yaml").write_text("embedding: static\n", encoding="utf-8")
    res = run("--kb", str(target), "import", str(out), "--json")
    assert res.exit_code == 0, res.output
    with KnowledgeBase.open(ingest["home"]) as a, KnowledgeBase.open(target) as b:
        assert {r[0] for r in b.conn.execute("SELECT anchor FROM chunks")} == ingest["anchors"]
        va = _vectors_by_anchor(a)
        vb = _vectors_by_anchor(b)
        assert va.keys() == vb.keys() and all(np.array_equal(va[k], vb[k]) for k in va)
        hit = b.search("USART2 baud", mode="hybrid", limit=1).hits[0]
        assert hit.anchor.path.endswith("uart.md")  # lexical index rebuilt, vectors usable
        assert b.status()["dense"]["chunks"] == len(ingest["anchors"])
    close_client(ingest["settings"])


def test_export_to_milvus_then_import_from_it(ingest: dict[str, Any], tmp_path: Path) -> None:
    lite = str(tmp_path / "moved.db")
    res = run("--kb", str(ingest["home"]), "export", "--to", lite, "--collection", "moved")
    assert res.exit_code == 0, res.output
    target = tmp_path / "copy"
    target.mkdir()
    (target / "config.yaml").write_text("embedding: static\n", encoding="utf-8")
    res = run("--kb", str(target), "import", lite, "--collection", "moved")
    assert res.exit_code == 0, res.output
    with KnowledgeBase.open(target) as b:
        assert {r[0] for r in b.conn.execute("SELECT anchor FROM chunks")} == ingest["anchors"]
    close_client(milvus_settings({"uri": lite}, None, "t"))
    close_client(ingest["settings"])


def test_import_with_another_model_is_a_clear_error(ingest: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "dump"
    assert run("--kb", str(ingest["home"]), "export", "--to", str(out)).exit_code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["signature"] = {**manifest["signature"], "model": "other-model", "dim": 8}
    (out / "manifest.json").write_text(json.dumps(manifest))
    from clawkb.backends.transfer import import_kb

    with pytest.raises(IndexError_, match="other-model"), KnowledgeBase.open(ingest["home"]) as kb:
        import_kb(kb, str(out))
    res = run("--kb", str(ingest["home"]), "import", str(tmp_path / "nothing"))
    assert res.exit_code == 2 and "not a clawkb export" in res.output
    close_client(ingest["settings"])


def _vectors_by_anchor(kb: KnowledgeBase) -> dict[str, np.ndarray]:
    rows = kb.conn.execute(
        "SELECT c.anchor, v.vec FROM chunks c JOIN chunk_vectors cv ON cv.chunk_id = c.id"
        " JOIN vectors v ON v.model = cv.model AND v.key = cv.key"
    )
    return {a: np.frombuffer(v, "<f4") for a, v in rows}


def test_bad_backend_settings_are_one_line_errors(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    home.mkdir()
    (home / "config.yaml").write_text("backend: {kind: milvus, colection: x, uri: a.db}\n")
    with KnowledgeBase.open(home, create=True) as kb, pytest.raises(ClawkbError, match="colection"):
        kb_backend(kb)
    res = run("--kb", str(home), "status")
    (home / "config.yaml").write_text("backend: {kind: milvus}\n")
    with KnowledgeBase.open(home) as kb, pytest.raises(ClawkbError, match="needs a `uri`"):
        kb_backend(kb)
    assert res.exit_code == 2 and "colection" in res.output


def test_eval_backend_milvus_scores_like_local() -> None:
    mini = str(Path(__file__).parent / "data" / "beir-mini" / "cranfield")
    # all 20 queries: with 10, one query moved by the title weight is 0.01 nDCG alone
    local = run("eval", mini, "--json")
    remote = run("eval", mini, "--backend", "milvus", "--json")
    assert local.exit_code == 0 and remote.exit_code == 0, remote.output
    lo = json.loads(local.stdout)["metrics"]["ndcg@10"]
    data = json.loads(remote.stdout)
    assert data["backend"] == "milvus" and set(data["modes"]) == {"lexical"}
    assert abs(data["modes"]["lexical"]["metrics"]["ndcg@10"] - lo) <= 0.01
