"""The page as a workbench, in a real headless browser (Debian's chromium + Playwright).

One server (two KBs, an inbox, no LLM: answers are extractive) and one browser
for the module: drag-and-drop upload with its index report, the hit test and
saving its settings into config.yaml, golden queries added from a hit and
checked, a chat whose follow-up is rewritten, the KB switcher, no search while
an IME composition is open, Enter-to-ask, the no-match state, relative paths,
the status view, at desktop and phone (390×844) widths. (The wrong-token
message and the offline banner are in test_server_browser.py, on its token
server.) The browser console must show no Content-Security-Policy violation.
Screenshots go to tests/artifacts/.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'clawkb[server]'")
pytest.importorskip("playwright", reason="needs playwright (the dev extra)")

from playwright.sync_api import Browser, Page, expect

from browser_helpers import ARTIFACTS, launched, require_chromium
from server_helpers import DOCS, Server, serving, write_docs

require_chromium()

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 860}
CAN = {"can.md": "# CAN bus\n\n## Wiring\n\nThe CAN bus is wired to connector J9 with a "
       "120 Ω terminator. Its baud rate is 250000.\n"}  # fmt: skip
HW_DOCS = {"relay.md": "# Relay board\n\nThe relay coil is driven by GPIO17 through a "
           "ULN2003 darlington array.\n"}  # fmt: skip
OPS_TOKEN = "ops-token-12345"


@pytest.fixture(scope="module")
def kbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from clawkb import KnowledgeBase

    tmp = tmp_path_factory.mktemp("workbench")
    home, root = tmp / "kb", tmp / "team-kb"
    write_docs(root, {**DOCS, **CAN})  # no datasheets: this module needs no boards
    (root / "inbox").mkdir()
    hw_root = tmp / "hw-docs"
    write_docs(hw_root, HW_DOCS)
    hw = tmp / "hw" / ".clawkb"
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([root])
    with KnowledgeBase.open(hw, create=True) as kb:
        kb.index([hw_root])
    ops = tmp / "ops"
    with KnowledgeBase.open(ops, create=True) as kb:
        kb.index([hw_root])
    cfg = {"server": {"kbs": {"ops": {"home": str(ops), "token": OPS_TOKEN}}}}
    (home / "config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return {"home": home, "root": root, "hw": hw, "hw_root": hw_root}


@pytest.fixture(scope="module")
def srv(kbs: dict[str, Path]) -> Iterator[Server]:
    args = ["--inbox", str(kbs["root"] / "inbox"), "--add-kb", f"hw={kbs['hw']}", "--no-mcp"]
    with serving(kbs["home"], [kbs["root"]], args=args) as s:
        yield s


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched() as b:
        yield b


def open_page(
    browser: Browser, url: str, viewport: dict[str, int] = DESKTOP, **ctx: Any
) -> tuple[Page, list[str]]:
    context = browser.new_context(viewport=viewport, locale="en-US", **ctx)
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if m.type in ("error", "warning") else None)
    page.goto(url)
    return page, console


def no_csp_violation(console: list[str]) -> None:
    bad = [m for m in console if "Content Security Policy" in m or "Refused to" in m]
    assert not bad, bad


def shot(page: Page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_search_fixes_ime_no_match_relative_paths(
    browser: Browser, srv: Server, viewport: dict[str, int]
) -> None:
    page, console = open_page(browser, srv.url + "/", viewport)
    searches: list[str] = []
    page.on("request", lambda r: searches.append(r.url) if "/search?" in r.url else None)
    # an IME composition: input events while composing never search; compositionend does
    page.locator("#q").focus()
    page.evaluate("""() => {
      const q = document.querySelector('#q');
      q.dispatchEvent(new CompositionEvent('compositionstart', {data: ''}));
      for (const v of ['z', 'zo', 'zou', 'zou x', 'zou xian']) {
        q.value = v;
        q.dispatchEvent(new InputEvent('input', {data: v, isComposing: true, inputType: 'insertCompositionText'}));
      }
      q.value = '走线';
      q.dispatchEvent(new CompositionEvent('compositionend', {data: '走线'}));
    }""")
    first = page.locator("#results .hit").first
    expect(first.locator(".loc")).to_contain_text("layout/ddr.md")
    assert len(searches) == 1 and "%E8%B5%B0%E7%BA%BF" in searches[0], searches
    # paths relative to the served root, not absolute
    assert not first.locator(".loc").inner_text().startswith("/")
    # no match: a visible empty state, not a blank page
    page.locator("#q").fill("qwxzvbnmpoiu")
    expect(page.locator("#results .empty")).to_contain_text("No match for")
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"] + 1
    shot(page, f"wb-no-match-{viewport['width']}")
    no_csp_violation(console)
    page.context.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_chat_follow_up_and_enter_to_ask(
    browser: Browser, srv: Server, viewport: dict[str, int]
) -> None:
    page, console = open_page(browser, srv.url + "/#ask", viewport)
    expect(page.locator("#ask-hint")).to_contain_text("Shift+Enter")
    box = page.locator("#question")
    box.fill("How is the CAN bus wired?")
    box.press("Shift+Enter")  # a new line, no question sent
    assert "\n" in box.input_value()
    expect(page.locator("#thread .turn")).to_have_count(0)
    box.fill("How is the CAN bus wired?")
    box.press("Enter")  # Enter asks
    turns = page.locator("#thread .turn")
    expect(turns.first.locator(".sources li .loc").first).to_contain_text("can.md", timeout=20000)
    box.fill("What is its baud rate?")
    box.press("Enter")
    second = turns.nth(1)
    expect(second.locator(".standalone")).to_contain_text("CAN", timeout=20000)
    expect(second.locator(".answer")).to_contain_text("250000")
    expect(second.locator(".sources li .loc").first).to_contain_text("can.md")
    expect(
        turns.first.locator(".sources li").first
    ).to_be_visible()  # earlier turn keeps its citations
    assert box.input_value() == ""
    shot(page, f"wb-chat-{viewport['width']}")
    second.locator(".answer .cite").first.click()
    expect(page.locator("#v-title")).to_contain_text("can.md")
    page.keyboard.press("Escape")
    no_csp_violation(console)
    page.context.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_hit_test_save_settings_and_golden(
    browser: Browser, srv: Server, kbs: dict[str, Path], viewport: dict[str, int]
) -> None:
    page, console = open_page(browser, srv.url + "/#hits", viewport)
    page.locator("#h-q").fill("DQS 等长")
    page.locator("#h-mode").select_option("lexical")
    page.locator("#h-wl").fill("1.5")
    page.locator("#h-mc").fill("0.6")
    page.locator("#hits-form button[type=submit]").click()
    first = page.locator("#hit-list .hit").first
    expect(first.locator(".score")).to_contain_text("score")
    expect(first.locator(".loc")).to_contain_text("layout/ddr.md")
    expect(first.locator("details summary")).to_be_visible()  # explain per hit
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"] + 1
    shot(page, f"wb-hit-test-{viewport['width']}")
    page.locator("#h-save").click()
    expect(page.locator("#hits-info")).to_contain_text("config.yaml")
    saved = yaml.safe_load((kbs["home"] / "config.yaml").read_text(encoding="utf-8"))
    assert saved["retrieval"]["mode"] == "lexical" and saved["retrieval"]["w_lexical"] == 1.5
    assert saved["retrieval"]["min_confidence"] == 0.6
    assert saved["server"]["kbs"]["ops"]["token"] == OPS_TOKEN  # the rest of the file kept
    assert srv.ok("GET", "/api/v1/status")["search"]["configured"] == "lexical"

    first.locator(".add-golden").click()
    expect(first.locator(".add-golden")).to_have_text("Added to golden queries")
    # one entry that will miss, added through the API
    srv.ok("POST", "/api/v1/golden", json={"query": "DQS 等长", "expect_path": "uart.md"})
    page.locator("[data-tab=golden]").click()
    rows = page.locator("#golden tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("layout/ddr.md")
    page.locator("#g-check").click()
    expect(page.locator("#g-summary")).to_contain_text("hit@3 50%")
    expect(rows.first.locator(".ok")).to_contain_text("rank 1")
    expect(rows.nth(1).locator(".miss")).to_contain_text("got")
    shot(page, f"wb-golden-{viewport['width']}")
    golden = yaml.safe_load((kbs["home"] / "golden.yaml").read_text(encoding="utf-8"))
    assert golden["queries"][0] == {"query": "DQS 等长", "expect_path": "layout/ddr.md"}
    rows.nth(1).locator("button").click()
    expect(rows).to_have_count(1)
    rows.first.locator("button").click()  # the next run starts from no golden file
    expect(page.locator("#golden tbody tr.empty")).to_be_visible()
    assert not (kbs["home"] / "golden.yaml").exists()
    no_csp_violation(console)
    page.context.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_drag_and_drop_upload(browser: Browser, srv: Server, viewport: dict[str, int]) -> None:
    page, console = open_page(browser, srv.url + "/#upload", viewport)
    expect(page.locator("#inbox")).to_contain_text("inbox")
    name = f"spi-{viewport['width']}.md"
    part = f"W25Q{viewport['width']}JV"
    transfer = page.evaluate_handle(
        """([name, part]) => { const dt = new DataTransfer();
          dt.items.add(new File([`# SPI flash\\n\\nThe ${part} flash sits on SPI0 chip select 1.\\n`],
                                name, {type: 'text/markdown'}));
          return dt; }""",
        [name, part],
    )
    page.dispatch_event("#drop", "drop", {"dataTransfer": transfer})
    item = page.locator("#uploads li").first
    expect(item).to_have_attribute("data-done", "1", timeout=20000)
    expect(item).to_contain_text("indexed: +1")
    bad = page.evaluate_handle(
        "() => { const dt = new DataTransfer(); dt.items.add(new File(['x'], 'evil.exe')); return dt; }"
    )
    page.dispatch_event("#drop", "drop", {"dataTransfer": bad})
    expect(page.locator("#uploads li").first).to_have_attribute("data-done", "0")
    expect(page.locator("#uploads li .err").first).to_contain_text("not accepted")
    shot(page, f"wb-upload-{viewport['width']}")
    page.locator("[data-tab=search]").click()
    page.locator("#q").fill(part)
    expect(page.locator("#results .hit .loc").first).to_contain_text(f"inbox/{name}")
    no_csp_violation(console)
    page.context.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_kb_switch_and_status(
    browser: Browser, srv: Server, kbs: dict[str, Path], viewport: dict[str, int]
) -> None:
    page, console = open_page(browser, srv.url + "/#status", viewport)
    info = page.locator("#kb-info")
    expect(info).to_contain_text(str(kbs["home"]))
    expect(info).to_contain_text("Search mode")
    expect(info).to_contain_text("extractive")
    expect(page.locator("#legend")).to_contain_text("Chunks: searchable passages")
    expect(page.locator("#counts")).to_contain_text("Vectors pending")
    shot(page, f"wb-status-{viewport['width']}")
    switcher = page.locator("#kb")
    expect(switcher).to_be_visible()
    switcher.select_option("hw")
    expect(info).to_contain_text(str(kbs["hw"]))
    page.locator("[data-tab=search]").click()
    page.locator("#q").fill("ULN2003")
    expect(page.locator("#results .hit .loc").first).to_have_text("relay.md:1-3")
    page.locator("#q").fill("走线阻抗")  # only in the default KB
    expect(page.locator("#results .empty")).to_be_visible()
    shot(page, f"wb-kb-switch-{viewport['width']}")
    page.reload()  # the choice lasts for the tab
    expect(page.locator("#kb")).to_have_value("hw")
    page.locator("#kb").select_option(page.locator("#kb option").first.get_attribute("value") or "")
    page.locator("#q").fill("走线阻抗")
    expect(page.locator("#results .hit").first).to_be_visible()
    # a KB with its own token: the page asks for it, and keeps it for that KB only
    page.locator("#q").fill("")
    page.locator("#kb").select_option("ops")
    page.locator("#q").fill("GPIO17")
    expect(page.locator("#token-dialog")).to_be_visible()
    page.locator("#token").fill(OPS_TOKEN)
    page.locator("#token-form button").click()
    expect(page.locator("#results .hit .loc").first).to_contain_text("relay.md")
    assert page.evaluate("sessionStorage.getItem('clawkb.token@ops')") == OPS_TOKEN
    assert page.evaluate("sessionStorage.getItem('clawkb.token')") is None
    no_csp_violation(console)
    page.context.close()
