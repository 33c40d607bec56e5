"""Alias expansion from real datasheet tables, and LLM rewriting with its budget and cache
(a deterministic chat client stands in for the remote model, behind the same interface)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from clawkb import KnowledgeBase
from clawkb.hardware import index_datasheets
from clawkb.knowledge.rewrite import LLMRewriter, alias_terms, parse_reply, rewriter_for
from clawkb.llm import ChatReply


class FakeChat:
    name = "fake-model"

    def __init__(self, reply: str, delay: float = 0.0, fail: bool = False) -> None:
        self.reply, self.delay, self.fail, self.calls = reply, delay, fail, 0

    def chat(self, messages: Sequence[dict[str, str]], **_: object) -> ChatReply:
        self.calls += 1
        time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("endpoint down")
        assert messages[-1]["content"]
        return ChatReply(self.reply, self.name)


REPLY = json.dumps(
    {"variants": ["UART2 baud", "debug console speed", "UART2 baud"], "hyde": "UART2 runs at 1.5M."}
)


def test_llm_variants_hyde_cache_budget_and_failure(tmp_path: Path) -> None:
    cache = tmp_path / "cache" / "rewrite.json"
    client = FakeChat("```json\n" + REPLY + "\n```")
    rw = LLMRewriter(client, budget_s=2.0, cache_file=cache)
    out = rw.rewrite("uart2 baud")
    assert out.variants == ["debug console speed"] and out.hyde == "UART2 runs at 1.5M."
    again = LLMRewriter(client, budget_s=2.0, cache_file=cache).rewrite("uart2 baud")
    assert again.cached and again.variants == out.variants and client.calls == 1
    slow = LLMRewriter(FakeChat(REPLY, delay=1.0), budget_s=0.05).rewrite("q")
    assert slow.variants == [] and "budget" in slow.note and slow.took_ms < 900
    down = LLMRewriter(FakeChat(REPLY, fail=True), budget_s=1.0).rewrite("q")
    assert down.variants == [] and "endpoint down" in down.note
    prose = LLMRewriter(FakeChat("no json here"), budget_s=1.0).rewrite("q")
    assert prose.variants == [] and "not JSON" in prose.note
    assert parse_reply('{"variants": "x"}', "q") == ([], "")


def test_rewriter_off_unless_enabled_and_configured(tmp_path: Path) -> None:
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        assert rewriter_for(kb) is None
    (tmp_path / "kb" / "config.yaml").write_text("knowledge:\n  rewrite: true\n", encoding="utf-8")
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        assert rewriter_for(kb) is None  # no model configured


def test_alias_expansion_from_datasheet_tables(tmp_path: Path) -> None:
    example = Path(__file__).parents[1] / "examples" / "datasheets" / "nucleo-f401re.md"
    ds = tmp_path / "datasheets"
    ds.mkdir()
    shutil.copy(example, ds / example.name)
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        index_datasheets(kb, [], [ds])
        pins = dict(kb.conn.execute("SELECT alias, pin FROM pin_aliases"))
        assert pins.get("red_led"), "the example datasheet names the red LED"
        added = alias_terms(kb.conn, "turn on the red LED")
        assert pins["red_led"] in added
        assert "red led" in [
            t.casefold() for t in alias_terms(kb.conn, f"what is {pins['red_led']}")
        ]
        assert alias_terms(kb.conn, "nothing to see") == []
        assert tiers_of(kb) == {"official"}


def tiers_of(kb: KnowledgeBase) -> set[str]:
    return {r[0] for r in kb.conn.execute("SELECT trust FROM documents")}


def test_search_fuses_llm_variants_and_alias_variant(tmp_path: Path) -> None:
    from clawkb.knowledge.search import KnowledgeOptions

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "console.md").write_text(
        "# Console\n\nThe debug console speed is 1500000 on header J6.\n", encoding="utf-8"
    )
    (docs / "other.md").write_text("# Other\n\nUART2 pins are on header J7.\n", encoding="utf-8")
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index([docs])
        plain = kb.search("uart2 baud").hits
        assert all(not h.anchor.path.endswith("console.md") for h in plain)
        client = FakeChat(REPLY)
        opts = KnowledgeOptions(rewriter=LLMRewriter(client, budget_s=2.0))
        hits = kb.search("uart2 baud", knowledge=opts).hits
        assert any(h.anchor.path.endswith("console.md") for h in hits)
        assert hits[0].anchor.path.endswith("other.md")  # the typed query still leads
        slow = KnowledgeOptions(rewriter=LLMRewriter(FakeChat(REPLY, delay=1.0), budget_s=0.05))
        res = kb.search("uart2 baud", knowledge=slow)
        assert [h.anchor.path for h in res.hits] == [h.anchor.path for h in plain]
        assert any("budget" in w for w in res.warnings)
