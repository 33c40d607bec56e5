"""The workbench API on a real `clawkb serve`: settings written through the one settings
model, golden file edits, chat conversations, several KBs with per-KB tokens."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'clawkb[server]'")

from server_helpers import Server, serving, write_docs

TOKEN = "server-token-123"
OPS_TOKEN = "ops-only-token-1"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from clawkb import KnowledgeBase

    tmp = tmp_path_factory.mktemp("wbapi")
    home, root = tmp / "kb", tmp / "team-kb"
    write_docs(root)
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([root])
    other = tmp / "other-docs"
    write_docs(
        other, {"relay.md": "# Relay\n\nThe relay coil is driven by GPIO17 via a ULN2003.\n"}
    )
    ops = tmp / "ops" / ".clawkb"
    with KnowledgeBase.open(ops, create=True) as kb:
        kb.index([other])
    cfg = {
        "retrieval": {"rrf_k": 30},
        "server": {"kbs": {"ops": {"home": str(ops), "token": OPS_TOKEN}}},
    }
    (home / "config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return {"home": home, "root": root, "ops": ops}


@pytest.fixture(scope="module")
def srv(setup: dict[str, Path]) -> Iterator[Server]:
    with serving(setup["home"], [setup["root"]], token=TOKEN, args=["--no-mcp"]) as s:
        yield s


def test_settings_go_through_the_settings_model(srv: Server, setup: dict[str, Path]) -> None:
    got = srv.ok("GET", "/api/v1/settings")["settings"]
    assert got["retrieval.rrf_k"] == {"value": 30, "source": "config.yaml"}
    r = srv.http.put("/api/v1/settings", json={"settings": {"retrieval": {"mdoe": "lexical"}}})
    assert r.status_code == 400 and "did you mean 'retrieval.mode'" in r.json()["message"], r.text
    r = srv.http.put("/api/v1/settings", json={"settings": {"retrieval": {"mode": "fast"}}})
    assert r.status_code == 400 and "mode" in r.json()["message"]
    r = srv.http.put("/api/v1/settings", json={"settings": {"server": {"roots": ["/"]}}})
    assert r.status_code == 400 and "cannot be changed here" in r.json()["message"]
    evil = {"rerank": "endpoint", "rerank_options": {"url": "http://198.51.100.7/rerank"}}
    r = srv.http.put("/api/v1/settings", json={"settings": {"retrieval": evil}})
    assert r.status_code == 400 and "cannot be changed from the page" in r.json()["message"]
    file = setup["home"] / "config.yaml"
    assert "mdoe" not in file.read_text(encoding="utf-8")  # nothing written on a refusal
    got = srv.ok("PUT", "/api/v1/settings",
                 json={"settings": {"retrieval": {"mode": "lexical", "rrf_k": None}}})  # fmt: skip
    assert got["settings"]["retrieval.mode"]["value"] == "lexical"
    assert got["settings"]["retrieval.rrf_k"]["source"] == "default"
    saved = yaml.safe_load(file.read_text(encoding="utf-8"))
    assert saved["retrieval"] == {"mode": "lexical"} and saved["server"]["kbs"]["ops"]
    assert srv.ok("GET", "/api/v1/search", params={"q": "UART2"})["mode"] == "lexical"


def test_golden_edits_are_checked(srv: Server, setup: dict[str, Path]) -> None:
    r = srv.http.post("/api/v1/golden", json={"query": "", "expect_path": "x.md"})
    assert r.status_code == 422
    g = srv.ok("POST", "/api/v1/golden", json={"query": "UART2 baud", "expect_path": "uart.md"})
    assert g["queries"] == [{"query": "UART2 baud", "expect_path": "uart.md"}]
    r = srv.http.post("/api/v1/golden", json={"query": "UART2 baud", "expect_path": "uart.md"})
    assert r.status_code == 400 and "already listed" in r.json()["message"]
    report = srv.ok("POST", "/api/v1/golden/check")
    assert report["passed"] and report["results"][0]["rank"] == 1
    assert (setup["home"] / "golden.yaml").is_file()
    srv.ok("POST", "/api/v1/golden/remove", json={"index": 0})
    assert not (setup["home"] / "golden.yaml").exists()


def test_chat_keeps_a_conversation(srv: Server) -> None:
    first = srv.ok("POST", "/api/v1/chat", json={"question": "What is the baud rate of UART2?"})
    assert first["turn"] == 1 and "1500000" in first["result"]["answer"]
    cid = first["conversation"]
    second = srv.ok(
        "POST", "/api/v1/chat", json={"question": "what about UART3?", "conversation": cid}
    )
    assert second["turn"] == 2 and second["standalone"] == "What is the baud rate of UART3?"
    assert second["result"]["question"] == second["standalone"]  # retrieval saw the rewrite
    assert second["result"]["citations"]
    r = srv.post("/api/v1/chat", json={"question": "and then?", "conversation": "nope"})
    assert r.status_code == 404 and r.json()["code"] == "not_found"


def test_several_kbs_with_their_own_tokens(srv: Server, setup: dict[str, Path]) -> None:
    listed = srv.ok("GET", "/api/v1/kbs")
    assert [k["name"] for k in listed["kbs"]] == ["kb", "ops"]
    assert listed["default"] == "kb"
    # the server's token opens every KB; old paths are the default KB
    hits = srv.ok("GET", "/api/v1/kb/ops/search", params={"q": "ULN2003"})["hits"]
    assert hits and hits[0]["path"].endswith("relay.md")
    assert not srv.ok("GET", "/api/v1/search", params={"q": "ULN2003"})["hits"]
    assert srv.ok("GET", "/api/v1/kb/kb/search", params={"q": "UART2"})["hits"]
    status = srv.ok("GET", "/api/v1/kb/ops/status")
    assert status["home"] == str(setup["ops"]) and status["server"]["kb"] == "ops"
    # the ops token opens ops only
    ops = {"authorization": f"Bearer {OPS_TOKEN}"}
    anon = srv.http.get(
        "/api/v1/kb/ops/search", params={"q": "relay"}, headers={"authorization": ""}
    )
    assert anon.status_code == 401
    assert (
        srv.http.get("/api/v1/kb/ops/search", params={"q": "relay"}, headers=ops).status_code == 200
    )
    assert srv.http.get("/api/v1/search", params={"q": "relay"}, headers=ops).status_code == 401
    assert srv.http.get("/api/v1/kb/kb/status", headers=ops).status_code == 401
    r = srv.get("/api/v1/kb/nope/search", params={"q": "x"})
    assert r.status_code == 404 and "nope" in r.json()["message"]


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("hw", "expected NAME=KB_DIR"),
        ("bad name=.", "must be letters, digits"),
        ("hw=does-not-exist", "is not a knowledge-base folder"),
    ],
)
def test_add_kb_refuses_bad_flags(setup: dict[str, Path], flag: str, message: str) -> None:
    from click.testing import CliRunner

    from clawkb.cli.main import cli

    res = CliRunner().invoke(
        cli, ["--kb", str(setup["home"]), "serve", "--add-kb", flag, "--port", "0"]
    )
    assert res.exit_code != 0
    out = res.output.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("error:") and message in out[0], res.output
