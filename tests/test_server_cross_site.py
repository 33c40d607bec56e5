"""No other web site can write into the KB through the loopback server.

A page on another loopback origin, in a real browser, tries to upload a file
and store a memory; a curl-style probe sends the issue's multipart POST with a
foreign Origin. All are refused (403) and nothing is planted; the KB's own page
still uploads and asks. Every response carries CSP, X-Frame-Options and nosniff.
"""

from __future__ import annotations

import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'clawkb[server]'")

from server_helpers import Server, serving

PLANT = "planted cross-site note about the zebra firmware backdoor"


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    tmp = tmp_path_factory.mktemp("xsite")
    root = tmp / "docs"
    root.mkdir()
    (root / "uart.md").write_text("# UART\n\nThe debug console is UART2 at 1500000 baud.\n")
    home = tmp / "kb"
    home.mkdir()
    (home / "config.yaml").write_text("server:\n  allowed_origins: ['https://Tools.Example/']\n")
    from clawkb import KnowledgeBase

    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([root])
    with serving(home, [root], args=["--inbox", str(root / "inbox")]) as s:
        yield s, root


def raw(srv: Server) -> httpx.Client:
    """A client without any of the helper's defaults: what curl sends."""
    return httpx.Client(base_url=srv.url, timeout=30, trust_env=False)


def planted(srv: Server, root: Path) -> bool:
    inbox = root / "inbox"
    hits = srv.ok("GET", "/api/v1/search", params={"q": "zebra firmware backdoor"})["hits"]
    return bool(hits) or (inbox.is_dir() and any(inbox.glob("planted*")))


def test_curl_probe_with_a_foreign_origin_is_refused(srv: tuple[Server, Path]) -> None:
    s, root = srv
    files = {"file": ("planted.md", PLANT.encode(), "text/markdown")}
    with raw(s) as c:
        r = c.post("/api/v1/upload", files=files, headers={"origin": "https://evil.example"})
        assert r.status_code == 403 and r.json()["code"] == "cross_site", r.text
        # A Referer from another site counts the same when there is no Origin.
        r = c.post(
            "/api/v1/upload",
            files=files,
            headers={"referer": "http://127.0.0.1:1/attack.html", "x-clawkb-request": "1"},
        )
        assert r.status_code == 403, r.text
        # No origin at all but a form body without the client header: refused too.
        r = c.post("/api/v1/upload", files=files)
        assert r.status_code == 403 and "X-Clawkb-Request" in r.json()["message"]
        r = c.post(
            "/api/v1/memory", content=b'{"text": "x"}', headers={"content-type": "text/plain"}
        )
        assert r.status_code == 403
        r = c.post("/api/v1/memory", content=b'{"text": "' + PLANT.encode() + b'"}')
        assert r.status_code == 403, r.text  # no content type: FastAPI would read it as JSON
        # JSON writes from a foreign origin, and /mcp from one, are refused.
        r = c.post(
            "/api/v1/memory", json={"text": PLANT}, headers={"origin": "http://evil.example"}
        )
        assert r.status_code == 403
        r = c.post("/mcp", json={}, headers={"origin": "http://evil.example"})
        assert r.status_code == 403
    assert not planted(s, root)


def test_own_origin_and_plain_clients_still_write(srv: tuple[Server, Path]) -> None:
    s, _ = srv
    with raw(s) as c:
        own = s.url  # what a browser on the KB's own page sends
        r = c.post("/api/v1/memory", json={"text": "own-origin memory about SPI flash"},
                   headers={"origin": own})  # fmt: skip
        assert r.status_code == 200, r.text
        r = c.post("/api/v1/memory", json={"text": "a script without any origin"})
        assert r.status_code == 200, r.text
        files = {"file": ("notes.md", b"# Notes\n\nThe watchdog reload value is 0x5A.\n")}
        r = c.post("/api/v1/upload", files=files, headers={"x-clawkb-request": "1"})
        assert r.status_code == 200, r.text


def test_security_headers_on_page_and_api(srv: tuple[Server, Path]) -> None:
    s, _ = srv
    for path in ("/", "/static/app.js", "/api/v1/status", "/api/v1/nope"):
        r = s.get(path)
        assert r.headers["x-content-type-options"] == "nosniff", path
        assert r.headers["x-frame-options"] == "DENY", path
        csp = r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp, path


def test_configured_origin_may_write(srv: tuple[Server, Path]) -> None:
    s, _ = srv
    with raw(s) as c:
        ok = c.post("/api/v1/memory", json={"text": "from tools"},
                    headers={"origin": "https://tools.example"})  # fmt: skip
        assert ok.status_code == 200, ok.text
        bad = c.post("/api/v1/memory", json={"text": "from elsewhere"},
                     headers={"origin": "https://other.example"})  # fmt: skip
        assert bad.status_code == 403


# -- the same in a real browser ------------------------------------------------

ATTACK = """<!doctype html><html><body><script>
window.results = {};
async function attack(target) {
  const fd = new FormData();
  fd.append("file", new Blob([%r], {type: "text/markdown"}), "planted.md");
  try {
    const r = await fetch(target + "/api/v1/upload", {method: "POST", body: fd, mode: "no-cors"});
    window.results.upload = r.type;
  } catch (e) { window.results.upload = "error"; }
  try {
    await fetch(target + "/api/v1/memory", {method: "POST", mode: "no-cors",
      headers: {"content-type": "text/plain"}, body: JSON.stringify({text: %r})});
    window.results.memory = "sent";
  } catch (e) { window.results.memory = "error"; }
  try {
    const r = await fetch(target + "/api/v1/upload", {method: "POST", body: fd,
      headers: {"x-clawkb-request": "1"}});
    window.results.preflighted = r.status;
  } catch (e) { window.results.preflighted = "blocked"; }
  return window.results;
}
</script></body></html>""".replace("%r", repr(PLANT))


@pytest.fixture(scope="module")
def attacker() -> Iterator[str]:
    """Another loopback origin (127.0.0.2) serving the attacking page."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = ATTACK.encode()
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Page)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.2:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_page_on_another_origin_cannot_write(srv: tuple[Server, Path], attacker: str) -> None:
    pytest.importorskip("playwright", reason="needs playwright (the dev extra)")
    from playwright.sync_api import sync_playwright

    from browser_helpers import ARGS, CHROMIUM

    s, root = srv
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = b.new_page()
            page.goto(attacker + "/")
            out = page.evaluate("(t) => attack(t)", s.url)
            # The no-cors requests went out (opaque) and the preflighted one was blocked.
            assert out["upload"] == "opaque" and out["memory"] == "sent", out
            assert out["preflighted"] == "blocked", out
            assert not planted(s, root)
            memories = s.ok("GET", "/api/v1/memory")["memories"]
            assert not any("zebra" in m["text"] for m in memories), memories

            # The KB's own page: its api() helper uploads and stores through the guard.
            own = b.new_page()
            refused: list[str] = []  # CSP violations are console errors "Refused to ..."
            own.on("console", lambda m: refused.append(m.text) if "Refused" in m.text else None)
            own.goto(s.url + "/")
            own.fill("#q", "UART")
            own.wait_for_selector(".hit")
            status = own.evaluate(
                """async () => {
                  const fd = new FormData();
                  fd.append("file", new Blob(["# Own\\n\\nthe page's own upload: heron\\n"]),
                            "own-page.md");
                  const up = await api("/api/v1/upload", {method: "POST", body: fd});
                  const mem = await api("/api/v1/memory", {method: "POST",
                    headers: {"content-type": "application/json"},
                    body: JSON.stringify({text: "the page's own memory"})});
                  return [up.status, mem.status];
                }"""
            )
            assert status == [200, 200]
            assert not refused, refused  # the page lives within its own CSP
            assert s.ok("GET", "/api/v1/search", params={"q": "heron"})["hits"]
        finally:
            b.close()


if shutil.which("chromium") is None and not Path("/usr/bin/chromium").exists():
    test_page_on_another_origin_cannot_write = pytest.mark.skip(  # type: ignore[assignment]
        reason="Debian's chromium is not installed (apt-get install chromium)"
    )(test_page_on_another_origin_cannot_write)
