"""One meaning of "not found" (issue 19 item 5), on a real KB with e5-small vectors.

A query nothing in the KB is about: no hits, ``abstained`` in every channel
(Python, CLI exit 1, ``--json``, HTTP, MCP, the web page's empty state), and
``ask`` takes the same decision. A blank query is an error everywhere.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from clawkb.answer import answer
from clawkb.cli.main import cli
from clawkb.errors import ConfigError
from clawkb.kb import KnowledgeBase
from kb_helpers import build_kb

pytest.importorskip("onnxruntime")

DOCS = {
    "can.md": "# CAN bus termination\n\nA CAN bus needs a 120 ohm termination resistor at each "
    "of its two ends; the resistance between CANH and CANL is then about 60 ohm. Drive CAN_TERM_EN high to "
    "switch the on-board terminator in.\n",
    "uart.md": "# Debug console\n\nThe debug UART runs at 1500000 baud on header J6 "
    "(GND / TX / RX, 3.3 V levels).\n",
    "ddr.md": "# DDR4 routing\n\nDifferential pairs (CLK, DQS) are routed at 100 ohm "
    "impedance, single-ended signals at 50 ohm, within 10 %.\n",
    "boot.md": "# Boot order\n\nThe BootROM scans SPI NOR, then eMMC, then the SD card, "
    "then USB maskrom mode.\n",
    "power.md": "# 电源时序\n\nRK809 上电时先打开 BUCK1，再打开 BUCK2 和 LDO，间隔 2 毫秒。\n",
}
ANSWERABLE = ["What termination resistor does a CAN bus need?", "RK809 上电时序是什么？"]
OFF_TOPIC = ["What is the boiling point of ethanol?", "红烧肉怎么做才好吃？", "xqzv wplk jjrrtt"]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_kb(tmp_path_factory.mktemp("nf"), DOCS, embed=True)[0]


@pytest.fixture(scope="module")
def kb(home: Path) -> Iterator[KnowledgeBase]:
    with KnowledgeBase.open(home) as kb:
        yield kb


@pytest.mark.parametrize("q", ANSWERABLE)
def test_answerable_query_is_answered(kb: KnowledgeBase, q: str) -> None:
    res = kb.search(q, limit=3)
    assert res.hits and not res.abstained and res.message == ""
    assert res.decision is not None and not res.decision.abstain
    assert not answer(kb, q, llm="none").abstained


@pytest.mark.parametrize("q", OFF_TOPIC)
def test_off_topic_query_is_no_match_and_ask_agrees(kb: KnowledgeBase, q: str) -> None:
    res = kb.search(q, limit=3, budget_dense_ms=60_000.0)
    assert res.abstained and res.hits == [] and res.chunk_ids == []
    assert res.nearest and len(res.nearest) <= 3  # kept aside for callers that show them
    assert res.message.startswith("no match") and res.to_dict()["count"] == 0
    out = answer(kb, q, llm="none")
    assert out.abstained and out.passages  # the nearest passages, as before
    assert out.confidence is res.decision or out.confidence.value == pytest.approx(res.confidence)


def test_decision_does_not_depend_on_the_limit(kb: KnowledgeBase) -> None:
    for q in [*ANSWERABLE, *OFF_TOPIC]:
        one, many = kb.search(q, limit=1), kb.search(q, limit=20)
        assert one.abstained == many.abstained and one.confidence == pytest.approx(many.confidence)


def test_explicit_threshold_overrides_the_model(kb: KnowledgeBase) -> None:
    q = OFF_TOPIC[0]
    res = kb.search(q, limit=3, min_confidence=0.0)
    assert not res.abstained and res.hits
    assert kb.search(ANSWERABLE[0], limit=3, min_confidence=1.01).abstained


def test_lexical_mode_never_abstains_on_a_term_match(kb: KnowledgeBase) -> None:
    res = kb.search("ethanol termination", mode="lexical")
    assert res.hits and not res.abstained and res.decision is None


@pytest.mark.parametrize("blank", ["", "   ", "\t\n"])
def test_blank_query_is_an_error(kb: KnowledgeBase, blank: str) -> None:
    with pytest.raises(ConfigError, match="empty"):
        kb.search(blank)


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_cli_exit_codes(home: Path) -> None:
    hit = run("--kb", str(home), "search", ANSWERABLE[0])
    assert hit.exit_code == 0 and "can.md" in hit.output
    miss = run("--kb", str(home), "search", OFF_TOPIC[0])
    assert miss.exit_code == 1 and "no match" in miss.output and ".md" not in miss.output
    data = run("--kb", str(home), "search", OFF_TOPIC[0], "--json")
    assert data.exit_code == 1
    doc = json.loads(data.output)
    assert doc["abstained"] is True and doc["hits"] == [] and doc["count"] == 0
    for blank in ("", "   "):
        bad = run("--kb", str(home), "search", blank)
        assert bad.exit_code == 2 and "the query is empty" in bad.output
    assert run("--kb", str(home), "ask", "  ").exit_code == 2
    asked = run("--kb", str(home), "ask", OFF_TOPIC[0])
    assert asked.exit_code == 1


def test_http_and_web_page(home: Path) -> None:
    pytest.importorskip("fastapi")
    from server_helpers import serving

    with serving(home) as srv:
        ok = srv.ok("GET", "/api/v1/search", params={"q": ANSWERABLE[0]})
        assert ok["hits"] and ok["abstained"] is False
        miss = srv.ok("GET", "/api/v1/search", params={"q": OFF_TOPIC[0]})
        assert miss["abstained"] is True and miss["hits"] == [] and miss["count"] == 0
        for blank in ("", "  "):
            r = srv.get("/api/v1/search", params={"q": blank})
            assert r.status_code == 400 and "empty" in r.json()["message"], r.text
        r = srv.post("/api/v1/ask", json={"question": " "})
        assert r.status_code == 400, r.text
        _web_page_empty_state(srv.url)


def _web_page_empty_state(url: str) -> None:
    from server_helpers import browser_page

    with browser_page(url + "/") as page:
        if page is None:
            return
        from playwright.sync_api import expect

        page.locator("#q").fill(OFF_TOPIC[0])
        page.locator("#q").press("Enter")
        expect(page.locator("#results .empty")).to_contain_text("Nothing in the knowledge base")
        assert page.locator("#results .hit").count() == 0
        expect(page.locator("#search-info")).to_contain_text("no match")
        page.locator("#q").fill(ANSWERABLE[0])
        page.locator("#q").press("Enter")
        expect(page.locator("#results .hit").first).to_contain_text("can.md")


def test_mcp(home: Path) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    exe = str(Path(sys.executable).parent / "clawkb")

    async def main() -> None:
        params = StdioServerParameters(command=exe, args=["--kb", str(home), "mcp"])
        async with Client(params, read_timeout_seconds=60) as c:
            miss = await c.call_tool("search", {"query": OFF_TOPIC[0]})
            assert not miss.is_error and miss.structured_content is not None
            assert miss.structured_content["abstained"] is True
            assert miss.structured_content["hits"] == []
            bad = await c.call_tool("search", {"query": "   "})
            assert bad.is_error and "empty" in bad.content[0].text

    anyio.run(main)


def test_identifier_held_verbatim_is_answered_in_any_language(kb: KnowledgeBase) -> None:
    """A Chinese question around an identifier of an English page: the words are not in
    the KB, the identifier is; the decision answers, and ``ask`` agrees."""
    q = "如何使用 CAN_TERM_EN"
    res = kb.search(q, limit=3)
    assert res.hits and not res.abstained and "CAN_TERM_EN" in res.hits[0].text
    assert res.decision.method in ("identifier", "model")
    assert not answer(kb, q, llm="none").abstained
    # an identifier the KB does not hold is no evidence
    assert kb.search("如何配置 XQ_FOO_BAR 参数", limit=3).abstained


def test_verbatim_identifier_rule() -> None:
    from types import SimpleNamespace

    from clawkb.retrieve.notfound import verbatim
    from clawkb.text.identifiers import identifiers

    assert identifiers("调用 esp_wifi_init() 与 CONFIG_FOO, 寄存器 0x4002_3800。") == [
        "esp_wifi_init",
        "CONFIG_FOO",
        "0x4002_3800",
    ]
    assert identifiers("ObserverEvent and a.b.c but not GPIO or plain words.") == [
        "ObserverEvent",
        "a.b.c",
    ]
    page = SimpleNamespace(text="Call esp_wifi_init() first.")
    assert verbatim("如何使用 esp_wifi_init", [page])
    assert not verbatim("如何使用 esp_wifi_deinit", [page])
    assert not verbatim("how to start wifi", [page])  # no identifier in the question


def test_selective_anchor_held_verbatim_is_answered(kb: KnowledgeBase) -> None:
    """A quoted word few passages hold (the exact stage's anchor) is on the top passage:
    answered whatever the other words say; the same words without the anchor are not."""
    res = kb.search('"maskrom" 红烧肉怎么做', limit=3)
    assert res.hits and not res.abstained and "maskrom" in res.hits[0].text
    assert res.decision is not None and res.decision.features["anchor"] > 0
    assert kb.search("红烧肉怎么做", limit=3).abstained


def test_dense_background_features() -> None:
    """The top cosine against the query's own background list: a page that stands out
    scores high, a flat list of neighbours low, a short list (tiny KB) nothing."""
    from clawkb.retrieve.abstain_model import BACKGROUND_FROM, background

    flat = [0.82 - 0.0005 * i for i in range(60)]
    stands_out = [0.86, 0.84, *flat[2:]]
    assert background(flat)["dz"] < background(stands_out)["dz"]
    assert background(flat)["dgap"] < background(stands_out)["dgap"]
    assert background(stands_out[:2]) == {"dgap": 0.0, "dz": 0.0}  # nothing to compare
    assert background(stands_out[:BACKGROUND_FROM])["dgap"] > 0  # tiny KB: its lower half
    assert background(None) == {"dgap": 0.0, "dz": 0.0}


def test_second_look_when_a_decisive_lexical_top_fails(kb: KnowledgeBase) -> None:
    """A decisive lexical top-1 skips the dense channel; when the lexical decision then
    says "no match", the search looks again with both channels and the hybrid model
    decides (no "no match" rests on one channel once the KB has vectors)."""
    res = kb.search("maskrom 怎么做蛋糕", limit=3)
    stages = [s["stage"] for s in res.stages]
    assert "early_return" in stages and "second_look" in stages, stages
    assert stages.index("dense") > stages.index("second_look")
    assert res.decision is not None and res.decision.features["cos"] > 0  # the hybrid model
    # a decisive top-1 the lexical decision accepts: one look
    plain = kb.search("maskrom", limit=3)
    assert [s["stage"] for s in plain.stages] == ["rewrite", "lexical", "early_return", "fusion"]
    assert plain.hits and not plain.abstained
