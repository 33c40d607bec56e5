"""`clawkb serve`'s JSON API against a real server on loopback (uvicorn in a subprocess).

Hits must be exactly what `clawkb search --json` prints; errors have one shape;
no endpoint reads or writes outside the served roots.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'clawkb[server]'")

from llm_server import running_server
from server_helpers import CLAWKB, Server, make_kb, serving


@pytest.fixture(scope="module")
def llm() -> Iterator[Any]:
    with running_server() as srv:
        yield srv


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, Path]:
    tmp = tmp_path_factory.mktemp("serve")
    home, root, sheets = make_kb(tmp)
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nThe vault code is 7741.\n", encoding="utf-8")
    (home / "config.yaml").write_text(
        "server:\n  upload_max_bytes: 4096\n  max_body_bytes: 65536\n", encoding="utf-8"
    )
    return home, root, sheets, outside


@pytest.fixture(scope="module")
def srv(setup: tuple[Path, Path, Path, Path], llm: Any) -> Iterator[Server]:
    home, root, _, _ = setup
    env = {"CLAWKB_LLM_BASE_URL": llm.base_url, "CLAWKB_LLM_MODEL": "echo"}
    with serving(home, [root], args=["--inbox", str(root / "inbox")], env=env) as s:
        yield s


def error(r: Any, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"code", "message"} and body["code"] == code, body
    return str(body["message"])


def test_search_hits_are_the_cli_json(srv: Server, setup: tuple[Path, ...]) -> None:
    home = setup[0]
    api = srv.ok("GET", "/api/v1/search", params={"q": "DDR 走线阻抗", "limit": 3})
    cli = subprocess.run(
        [CLAWKB, "--kb", str(home), "search", "DDR 走线阻抗", "-n", "3", "--json"],
        capture_output=True, text=True, check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("CLAWKB_")},
    )  # fmt: skip
    expected = json.loads(cli.stdout)
    assert api["hits"] and api["hits"] == expected["hits"]
    assert {k for k in expected if k != "took_ms"} <= set(api)
    top = api["hits"][0]
    assert top["path"].endswith("layout/ddr.md") and top["heading_path"] == [
        "DDR 布线规则",
        "阻抗控制",
    ]
    assert top["highlights"] and top["anchor"]


def test_search_options_and_errors(srv: Server) -> None:
    only = srv.ok("GET", "/api/v1/search", params={"q": "UART2 阻抗", "path": "*uart.md"})
    assert {Path(h["path"]).name for h in only["hits"]} == {"uart.md"}
    typed = srv.ok("GET", "/api/v1/search", params={"q": "UART2", "type": "md", "explain": "true"})
    assert typed["hits"] and typed["hits"][0]["explanation"]
    board = srv.ok("GET", "/api/v1/search", params={"q": "LED pin", "board": "nucleo-f401re"})
    assert board["hits"]
    assert "limit" in error(
        srv.get("/api/v1/search", params={"q": "x", "limit": 0}), 400, "bad_request"
    )
    assert "mode" in error(
        srv.get("/api/v1/search", params={"q": "x", "mode": "magic"}), 400, "bad_request"
    )
    assert "q" in error(srv.get("/api/v1/search"), 422, "invalid_request")
    error(srv.get("/api/v1/nothing-here"), 404, "not_found")


def test_plain_search_answers_as_the_validated_route(srv: Server) -> None:
    """`?q=..&limit=N` takes the plain route (no per-request parameter validation); any
    other parameter takes the documented one: same hits, same errors."""
    from starlette.routing import Match

    from clawkb.server.api_read import PlainSearch, _plain_query

    def match(method: str, path: str, qs: bytes) -> Match:
        scope = {"type": "http", "method": method, "path": path, "query_string": qs}
        return PlainSearch().matches(scope)[0]

    assert match("GET", "/api/v1/search", b"q=x&limit=3") is Match.FULL
    assert match("GET", "/api/v1/search", b"q=x&explain=true") is Match.NONE
    assert match("POST", "/api/v1/search", b"q=x") is Match.NONE
    assert match("GET", "/api/v1/searches", b"q=x") is Match.NONE
    assert _plain_query(b"q=UART2&limit=3") and _plain_query(b"limit=5&q=x") and _plain_query(b"q=")
    for raw in (b"", b"limit=3", b"q=a&q=b", b"q=a&limit=-1", b"q=a&limit=1e3", b"q=a&mode=dense",
                b"q=a&limit=3&limit=4", b"q=a&limit=1000"):  # fmt: skip
        assert not _plain_query(raw), raw
    for q in ("DDR 走线阻抗", "UART2", "LED pin"):
        plain = srv.ok("GET", "/api/v1/search", params={"q": q, "limit": 3})
        checked = srv.ok("GET", "/api/v1/search", params={"q": q, "limit": 3, "explain": "false"})
        assert plain["hits"] and plain["hits"] == checked["hits"]
        assert {k for k in plain if k != "took_ms"} == {k for k in checked if k != "took_ms"}
    for params in ({"q": "x", "limit": 0}, {"q": "x", "limit": 101}, {"q": " "}):
        plain_msg = error(srv.get("/api/v1/search", params=params), 400, "bad_request")
        checked = error(
            srv.get("/api/v1/search", params={**params, "explain": "false"}), 400, "bad_request"
        )
        assert plain_msg == checked
    error(srv.get("/api/v1/search", params={"q": "x", "limit": "ten"}), 422, "invalid_request")
    assert srv.post("/api/v1/search", params={"q": "x"}).status_code == 405


def test_chunk_source_status_runs(srv: Server, setup: tuple[Path, ...]) -> None:
    hit = srv.ok("GET", "/api/v1/search", params={"q": "UART3 40-pin"})["hits"][0]
    chunk = srv.ok("GET", f"/api/v1/chunks/{hit['anchor']}", params={"neighbours": 1})
    assert chunk["text"] == hit["text"] and chunk["before"][0]["heading_path"] == [
        "Debug console",
        "UART2",
    ]
    error(srv.get("/api/v1/chunks/ffffffffffff"), 404, "not_found")

    view = srv.ok("GET", f"/api/v1/source/{hit['anchor']}", params={"context": 2})
    assert view["kind"] == "lines" and view["previous"] == chunk["before"][0]["anchor"]
    by_n = {ln["n"]: ln["text"] for ln in view["lines"]}
    assert by_n[hit["line_start"]].startswith("## UART3")
    assert min(by_n) == max(1, hit["line_start"] - 2)

    status = srv.ok("GET", "/api/v1/status")
    assert status["documents"] >= 3 and status["chunks"] > 0
    assert status["server"]["roots"] == [str(setup[1].resolve())]
    runs = srv.ok("GET", "/api/v1/runs")["runs"]
    assert runs and runs[0]["status"] == "done" and "errors" in runs[0]


def test_memory_round_trip(srv: Server) -> None:
    fact = {
        "text": "Board rev C moved UART2 to header J7",
        "namespace": "agent-1",
        "tags": ["uart"],
    }
    stored = srv.ok("POST", "/api/v1/memory", json=fact)
    assert stored["created"]
    recalled = srv.ok(
        "GET", "/api/v1/memory/recall", params={"q": "UART2 header", "namespace": "agent-1"}
    )
    assert recalled["hits"][0]["memory"]["id"] == stored["id"]
    listed = srv.ok("GET", "/api/v1/memory", params={"namespace": "agent-1"})
    assert [m["id"] for m in listed["memories"]] == [stored["id"]]
    assert "namespace" in error(
        srv.post("/api/v1/memory", json={"text": "x", "namespace": "no spaces"}), 400, "bad_request"
    )
    gone = srv.ok("POST", "/api/v1/memory/forget", json={"ids": [stored["id"]]})
    assert gone["count"] == 1
    assert srv.ok("GET", "/api/v1/memory/recall", params={"q": "UART2 header"})["count"] == 0


def test_pin_alias_is_seen_by_the_next_request(srv: Server, setup: tuple[Path, ...]) -> None:
    sheets = setup[2]
    edit = srv.ok(
        "POST",
        "/api/hardware/pin",
        json={"board": "nucleo-f401re", "alias": "status lamp", "pin": "PA6"},
    )
    assert Path(edit["path"]).resolve().parent == sheets.resolve()
    assert edit["alias"] == "status_lamp" and "status_lamp" in Path(edit["path"]).read_text(
        encoding="utf-8"
    )
    ctx = srv.ok(
        "GET", "/api/v1/hardware/context", params={"q": "status lamp pin", "board": "nucleo-f401re"}
    )
    assert any(a["alias"] == "status_lamp" and a["pin"] == "PA6" for a in ctx["aliases"])
    pins = srv.ok("GET", "/api/v1/hardware/pins", params={"board": "nucleo-f401re"})
    assert any(a["alias"] == "status_lamp" for a in pins["boards"]["nucleo-f401re"])
    assert "pin" in error(
        srv.post("/api/v1/hardware/pins", json={"board": "nucleo-f401re", "alias": "x", "pin": "??"}),
        400, "bad_request",
    )  # fmt: skip


def test_index_stays_inside_the_roots(srv: Server, setup: tuple[Path, ...]) -> None:
    root, outside = setup[1], setup[3]
    (root / "link-out").symlink_to(outside, target_is_directory=True)
    for bad in (
        "../outside",
        str(outside),
        "link-out",
        "link-out/secret.md",
        "layout/../../outside/secret.md",
        "..%2Foutside",
        "layout\\..\\..\\outside",
        "layout/\x00",
    ):
        body = json.dumps({"path": bad})
        r = srv.post("/api/v1/index", content=body, headers={"content-type": "application/json"})
        assert r.status_code in (400, 403), (bad, r.text)
        assert r.json()["code"] in ("outside_roots", "bad_request"), bad
    # percent-encoded separators in a query stay one (refused) name, never a path walk
    r = srv.get("/api/v1/source/..%2F..%2Fetc%2Fpasswd")
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    assert srv.ok("GET", "/api/v1/search", params={"q": "vault code 7741"})["count"] == 0

    (root / "new-note.md").write_text(
        "# Fresh\n\nThe flux capacitor needs 1.21 GW.\n", encoding="utf-8"
    )
    out = srv.ok("POST", "/api/v1/index", json={"path": "new-note.md"})
    assert out["report"]["added"] == 1
    assert srv.ok("GET", "/api/v1/search", params={"q": "flux capacitor"})["count"] == 1


def test_upload_into_the_inbox(srv: Server, setup: tuple[Path, ...]) -> None:
    root = setup[1]
    files = {
        "file": (
            "../../evil name.md",
            b"# Uploaded\n\nThe relay K3 switches 24 V.\n",
            "text/markdown",
        )
    }
    form = {"x-clawkb-request": "1"}  # what the page sends with a form body
    out = srv.ok("POST", "/api/v1/upload", files=files, headers=form)
    dest = Path(out["path"])
    assert dest.parent == (root / "inbox").resolve() and dest.name == "evil name.md"
    assert out["report"]["added"] == 1
    assert (
        srv.ok("GET", "/api/v1/search", params={"q": "relay K3"})["hits"][0]["path"] == out["path"]
    )
    big = {"file": ("big.md", b"x" * 5000, "text/markdown")}
    error(srv.post("/api/v1/upload", files=big, headers=form), 413, "too_large")
    exe = {"file": ("tool.exe", b"MZ\x90\x00", "application/octet-stream")}
    assert ".exe" in error(srv.post("/api/v1/upload", files=exe, headers=form), 400, "bad_request")
    assert not list((root / "inbox").glob(".upload-*"))


def test_body_limit(srv: Server) -> None:
    huge = {"text": "x" * 70000}
    error(srv.post("/api/v1/memory", json=huge), 413, "too_large")


def test_ask_json_and_stream(srv: Server, llm: Any) -> None:
    q = {"question": "What baud rate does the UART2 debug console use?"}
    plain = srv.ok("POST", "/api/v1/ask", json=q)
    assert plain["mode"] == "llm" and "UART2" in plain["answer"]
    assert plain["citations"] and plain["citations"][0]["path"].endswith("uart.md")

    events = []
    with srv.http.stream("POST", "/api/v1/ask", json={**q, "stream": True}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        name = None
        for line in r.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[6:])))
    kinds = [k for k, _ in events]
    assert kinds[-2:] == ["sources", "done"] and kinds.count("token") >= 2
    streamed = "".join(d["text"] for k, d in events if k == "token")
    final = events[-2][1]
    assert "UART2" in streamed and final["citations"] and "[" in final["answer"]


def test_openapi_and_metrics(srv: Server) -> None:
    spec = srv.ok("GET", "/api/v1/openapi.json")
    for path in ("/api/v1/search", "/api/v1/ask", "/api/v1/source/{anchor}", "/api/hardware/pin",
                 "/api/v1/upload", "/api/v1/memory/recall", "/healthz", "/readyz"):  # fmt: skip
        assert path in spec["paths"], path
    srv.ok("GET", "/api/v1/search", params={"q": "UART2"})
    text = srv.get("/metrics").text
    for name in (
        'clawkb_http_requests_total{endpoint="/api/v1/search",method="GET",status="200"}',
        'clawkb_http_requests_total{endpoint="/api/v1/chunks/{anchor}",method="GET",status="404"}',
        'clawkb_http_request_seconds_bucket{endpoint="/api/v1/search",le="0.0005"}',
        'clawkb_search_seconds_bucket{le="0.0005",mode="lexical",stage="total"}',
        'clawkb_index_runs_total{trigger="api"} 1.0',
        'clawkb_index_runs_total{trigger="upload"} 1.0',
        'clawkb_llm_calls_total{outcome="llm"} 2.0',
        "clawkb_llm_tokens_total ",
        "clawkb_watch_queue_depth ",
    ):
        assert name in text, name
    counts = dict(re.findall(r"^clawkb_(documents|chunks|segments|vectors) ([0-9.]+)", text, re.M))
    status = srv.ok("GET", "/api/v1/status")
    assert int(float(counts["documents"])) == status["documents"]
    assert int(float(counts["chunks"])) == status["chunks"]
    assert srv.ok("GET", "/healthz") == {"status": "ok"}
    assert srv.ok("GET", "/readyz")["status"] == "ready"


def test_source_view_of_a_pdf_page(srv: Server, setup: tuple[Path, ...]) -> None:
    pytest.importorskip("pypdfium2", reason="needs the pdf extra")
    from pdf_samples import text_pdf

    root = setup[1]
    pdf = root / "manual.pdf"
    pdf.write_bytes(
        text_pdf(
            [
                ["Power supply overview.", "The board runs from 5 V."],
                ["The brownout detector resets the chip at 2.7 V.", "Reset pulse is 2 ms."],
            ]
        )
    )
    srv.ok("POST", "/api/v1/index", json={"path": "manual.pdf"})
    hit = srv.ok("GET", "/api/v1/search", params={"q": "brownout detector"})["hits"][0]
    assert hit["path"] == pdf.as_posix() and hit["page"] == 2
    view = srv.ok("GET", f"/api/v1/source/{hit['anchor']}")
    assert view["kind"] == "page" and view["page"] == 2 and view["lines"] == []
    current = [p for p in view["passages"] if p["current"]]
    assert len(current) == 1 and "brownout" in current[0]["text"]
    assert view["previous"]  # the page-1 chunk
