"""The web page in a real headless browser (Debian's chromium driven by Playwright).

Types a Chinese query, opens the source viewer at the hit's lines, steps to the
next chunk, asks a question and follows a streamed answer's [n] citation, shows
the status page, checks that markup in a document stays text, that the page
works at phone width and by keyboard, and that it never requests anything
outside the loopback server. Screenshots go to tests/artifacts/ for humans.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'clawkb[server]'")
pytest.importorskip("playwright", reason="needs playwright (the dev extra)")

from playwright.sync_api import Browser, Page, expect

from browser_helpers import ARTIFACTS, launched, require_chromium
from llm_server import running_server
from server_helpers import Server, make_kb, serving

require_chromium()

TOKEN = "browser-token-123"


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    home, root, _ = make_kb(tmp_path_factory.mktemp("browser"))
    return home, root


@pytest.fixture(scope="module")
def srv(kb: tuple[Path, Path]) -> Iterator[Server]:
    with running_server() as llm:
        env = {"CLAWKB_LLM_BASE_URL": llm.base_url, "CLAWKB_LLM_MODEL": "echo"}
        with serving(kb[0], [kb[1]], env=env) as s:
            yield s


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched() as b:
        yield b


def open_page(browser: Browser, url: str, **ctx: Any) -> tuple[Page, list[str]]:
    context = browser.new_context(**ctx)
    page = context.new_page()
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.add_init_script("window.__alerts = 0; window.alert = () => { window.__alerts++; };")
    page.goto(url)
    return page, requested


def only_loopback(requested: list[str], base: str) -> None:
    outside = [u for u in requested if not (u.startswith(base + "/") or u.startswith("data:"))]
    assert requested and not outside, outside


def test_search_viewer_ask_status(browser: Browser, srv: Server) -> None:
    page, requested = open_page(browser, srv.url + "/", locale="zh-CN")
    expect(page.locator("[data-tab=search]")).to_have_text("搜索")  # follows the browser language
    page.locator("#q").press_sequentially("走线阻抗", delay=30)
    first = page.locator("#results .hit").first
    expect(first.locator(".loc")).to_contain_text("layout/ddr.md")
    expect(first.locator("mark").first).to_be_visible()
    hit = srv.ok("GET", "/api/v1/search", params={"q": "走线阻抗"})["hits"][0]
    page.screenshot(path=str(ARTIFACTS / "search.png"), full_page=True)

    first.click()
    viewer = page.locator("#viewer")
    expect(viewer).to_be_visible()
    lit = page.locator("#v-body .ln.hl")
    expect(lit.first).to_have_attribute("data-line", str(hit["line_start"]))
    assert lit.count() == hit["line_end"] - hit["line_start"] + 1
    expect(lit.first).to_be_in_viewport()
    page.screenshot(path=str(ARTIFACTS / "viewer.png"))
    title = page.locator("#v-title").inner_text()
    page.locator("#v-next").click()
    expect(page.locator("#v-title")).not_to_have_text(title)
    expect(page.locator("#v-title")).to_contain_text("长度匹配")
    page.keyboard.press("Escape")
    expect(viewer).to_be_hidden()

    page.locator("#lang").click()  # switch to English
    expect(page.locator("[data-tab=ask]")).to_have_text("Ask")
    page.locator("[data-tab=ask]").click()
    page.locator("#question").fill("What baud rate does the UART2 debug console use?")
    page.locator("#ask-form button").click()
    turn = page.locator("#thread .turn").last
    cite = turn.locator(".answer .cite").first
    expect(cite).to_be_visible(timeout=20000)
    expect(turn.locator(".answer")).to_contain_text("UART2")
    expect(turn.locator(".sources li .loc").first).to_contain_text("uart.md")
    page.screenshot(path=str(ARTIFACTS / "ask.png"), full_page=True)
    cite.click()
    expect(page.locator("#v-title")).to_contain_text("uart.md")
    page.keyboard.press("Escape")

    page.locator("[data-tab=status]").click()
    expect(page.locator("#counts dd").first).not_to_have_text("")
    expect(page.locator("#runs tbody tr").first).to_contain_text("done")
    page.screenshot(path=str(ARTIFACTS / "status.png"), full_page=True)
    only_loopback(requested, srv.url)
    page.context.close()


def test_markup_in_documents_stays_text(browser: Browser, srv: Server) -> None:
    page, requested = open_page(browser, srv.url + "/#search")
    page.locator("#q").fill("watchdog WDT reload")
    snip = page.locator("#results .hit .snip").first
    expect(snip).to_contain_text('<script>alert("xss")</script>')
    assert page.locator("#results script, #results img").count() == 0
    snip.click()
    expect(page.locator("#v-body")).to_contain_text("<img src=x onerror=alert(1)>")
    assert page.evaluate("window.__alerts") == 0
    assert page.locator("script").count() == 1  # only the page's own
    only_loopback(requested, srv.url)
    page.context.close()


def test_keyboard_and_phone_width(browser: Browser, srv: Server) -> None:
    page, requested = open_page(
        browser, srv.url + "/", viewport={"width": 375, "height": 740}, locale="en-US"
    )
    page.locator("#q").fill("UART2 baud")
    expect(page.locator("#results .hit").first).to_be_visible()
    page.locator("#q").press("ArrowDown")
    expect(page.locator("#results .hit.sel")).to_have_count(1)
    page.keyboard.press("Enter")
    expect(page.locator("#viewer")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 376
    page.screenshot(path=str(ARTIFACTS / "phone.png"))
    page.keyboard.press("Escape")
    expect(page.locator("#viewer")).to_be_hidden()
    page.keyboard.press("/")
    expect(page.locator("#q")).to_be_focused()
    only_loopback(requested, srv.url)
    page.context.close()


def test_page_asks_for_the_token_once(browser: Browser, kb: tuple[Path, Path]) -> None:
    """Then: a wrong token says so; a stopped server shows the offline banner and no stale
    results (one token server for both)."""
    with serving(kb[0], [kb[1]], token=TOKEN, args=["--no-mcp"]) as s:
        page, requested = open_page(browser, s.url + "/")
        console: list[str] = []
        page.on("console", lambda m: console.append(m.text))
        page.locator("#q").fill("UART2")
        expect(page.locator("#token-dialog")).to_be_visible()
        expect(page.locator("#token-error")).to_be_hidden()
        page.locator("#token").fill("wrong-token-999")
        page.locator("#token-form button").click()
        expect(page.locator("#token-error")).to_contain_text("refused")  # not a silent reopen
        page.locator("#token").fill(TOKEN)
        page.locator("#token-form button").click()
        expect(page.locator("#results .hit").first).to_be_visible()
        assert page.evaluate("sessionStorage.getItem('clawkb.token')") == TOKEN
        page.locator("#q").fill("DDR")  # no second prompt
        expect(page.locator("#results .hit").first).to_contain_text("ddr")
        expect(page.locator("#token-dialog")).to_be_hidden()
        only_loopback(requested, s.url)
        s.proc.terminate()
        s.proc.wait(timeout=15)
        page.locator("#q").fill("UART2")
        expect(page.locator("#banner")).to_contain_text("cannot be reached")
        expect(page.locator("#results .hit")).to_have_count(0)  # stale results cleared
        page.screenshot(path=str(ARTIFACTS / "offline.png"))
        assert not [m for m in console if "Content Security Policy" in m], console
        page.context.close()
