"""The bundled zh<->en glossary, query expansion with it, and per-query balancing."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from clawkb.errors import ConfigError
from clawkb.kb import KnowledgeBase, TextRecord
from clawkb.retrieve.crossling import balance
from clawkb.retrieve.rewrite import expand_query, rewrite
from clawkb.text.glossary import Glossary, Pair, bundled_glossary, load_glossary

CJK = re.compile(r"[\u3400-\u9fff]")
DOMAINS = {
    "electronics", "embedded", "os", "networking", "software", "pcb-power", "memory",
    "protocols", "tooling", "hardware", "physics", "general",
}  # fmt: skip


def test_bundled_glossary_is_large_clean_and_covers_every_domain():
    g = bundled_glossary()
    assert len(g) >= 2000
    pairs = Counter((p.zh, p.en) for p in g.pairs)
    assert [k for k, n in pairs.items() if n > 1] == []
    for p in g.pairs:
        assert CJK.search(p.zh) and not CJK.search(p.en), p
        assert p.en == p.en.strip() and p.zh == p.zh.strip() and "  " not in p.en, p
        assert 0 < p.weight <= 1 and p.domain in DOMAINS, p
    assert {p.domain for p in g.pairs} >= DOMAINS - {"general"}


def test_find_longest_terms_whole_words_and_plurals():
    g = Glossary(
        [
            Pair("电源", "power supply", "x"),
            Pair("电源管理芯片", "pmic", "x"),
            Pair("总线", "bus", "x"),
            Pair("后端", "backend", "x"),
        ]
    )
    assert [m.term for m in g.find("电源管理芯片的地址")] == ["电源管理芯片"]
    assert g.find("the device is busy") == []  # bus is not a word of busy
    assert [(m.term, m.translations) for m in g.find("Which backends?")] == [
        ("backend", (("后端", 1.0),))
    ]
    assert [m.term for m in g.find("Power Supply 和 总线")] == ["power supply", "总线"]


def test_expansion_both_directions_without_lone_characters():
    zh = expand_query("如何配置定时任务")
    added = dict(zip(zh.tokens[-zh.n_glossary :], zh.weights[-zh.n_glossary :], strict=True))
    assert {"configuration", "scheduled", "task", "cron", "job"} <= set(added)
    assert all(0 < w <= 1 for w in added.values())
    en = expand_query("differential impedance")
    tail = en.tokens[-en.n_glossary :]
    assert {"差分", "阻抗"} <= set(tail) and "阻" not in tail  # bigrams, never single characters
    assert rewrite("如何配置定时任务", []).n_glossary == 0  # no glossary given: untouched


def test_bad_glossary_line_names_file_and_line(tmp_path):
    p = tmp_path / "g.tsv"
    p.write_text(
        "zh\ten\tdomain\tweight\n电阻\tresistor\telectronics\t\nresistor\t电阻\tx\n", "utf-8"
    )
    with pytest.raises(ConfigError, match=r"g.tsv:3: first column must be Chinese"):
        load_glossary(p)
    p.write_text("电阻\tresistor\telectronics\t2\n", "utf-8")
    with pytest.raises(ConfigError, match=r"g.tsv:1: weight must be in"):
        load_glossary(p)


@pytest.fixture()
def bilingual_kb(tmp_path):
    kb = KnowledgeBase.open(tmp_path / "kb", create=True)
    kb.index_texts(
        [
            TextRecord(
                path="plate.md",
                text="# Shear flow\n\nThe boundary layer on a flat plate in a shear flow "
                "induces a pressure gradient along the plate.",
            ),
            *[
                TextRecord(
                    path=f"zh{i}.md",
                    text=f"# 笔记 {i}\n\n第{i}版平台的界面调整。",
                )
                for i in range(6)
            ],
        ]
    )
    yield kb
    kb.close()


def test_balance_lifts_the_english_answer_to_a_chinese_question(bilingual_kb):
    kb = bilingual_kb
    q = "剪切流中平板上的边界层会引起压力梯度吗？"
    raw = expand_query(q)
    balanced = balance(kb.lexical, raw)
    assert balanced.weights[: -raw.n_glossary] == raw.weights[: -raw.n_glossary]
    assert balanced.weights[-1] != raw.weights[-1]
    assert "plate.md" in [h.anchor.path for h in kb.search(q, limit=3).hits]
    off = kb.search(q, limit=10, mode="lexical", glossary=False)
    assert "plate.md" not in [h.anchor.path for h in off.hits]


class _Translator:
    """A deterministic stand-in for a remote model, behind the ChatClient interface."""

    name = "fake-translator"

    def __init__(self, delay_s: float = 0.0, fail: bool = False) -> None:
        self.delay_s, self.fail = delay_s, fail

    def chat(self, messages, *, on_token=None):  # type: ignore[no-untyped-def]
        import time

        from clawkb.llm import ChatReply, LLMError

        time.sleep(self.delay_s)
        if self.fail:
            raise LLMError("endpoint down")
        assert messages[0]["role"] == "system" and "Translate" in messages[0]["content"]
        table = {"意面怎么煮": "how to boil spaghetti"}
        return ChatReply(text=table.get(messages[-1]["content"], ""), model="fake")


def test_llm_translation_is_added_within_its_budget():
    from clawkb.retrieve.crossling import add_translation, translate_query

    assert translate_query(_Translator(), "意面怎么煮", 2000) == "how to boil spaghetti"
    assert translate_query(_Translator(delay_s=0.5), "意面怎么煮", 50) is None
    assert translate_query(_Translator(fail=True), "意面怎么煮", 2000) is None
    rw = add_translation(expand_query("意面怎么煮"), "how to boil spaghetti", 0.4)
    assert {"boil", "spaghetti"} <= set(rw.tokens[-rw.n_glossary :])
    assert rw.expansions[-1]["source"] == "llm"


def test_identifier_parts_are_not_translated() -> None:
    """`FROBNICATE_TIMEOUT_MS` is one identifier: its part `timeout` is no glossary term."""
    from clawkb.text.glossary import bundled_glossary

    g = bundled_glossary()
    assert [m.term for m in g.find("FROBNICATE_TIMEOUT_MS")] == []
    assert [m.term for m in g.find("CONFIG_WATCHDOG_TIMEOUT")] == []
    assert "timeout" in [m.term for m in g.find("the watchdog timeout is 5 s")]


class _Everything:
    """A set that contains everything: turns off find's start-position filters."""

    def __contains__(self, item: object) -> bool:
        return True


def test_find_skips_only_positions_where_no_term_starts():
    """The start filters (first two characters, first word) change no result."""
    import random

    g = bundled_glossary()
    unfiltered = Glossary(g.pairs)
    unfiltered._zh_heads = unfiltered._en_heads = _Everything()  # type: ignore[assignment]
    rnd = random.Random(5)
    pieces = [p.zh for p in g.pairs] + [p.en for p in g.pairs]
    pieces += [p.en + "s" for p in g.pairs] + [p.zh[1:] + p.zh[:1] for p in g.pairs]
    pieces += ["的", "a", "s", "x_", "_", "CONFIG_DMA_ENABLE", "0x40", "测", "试", "é", "-", " "]
    texts = [p for p in g.pairs for p in (p.zh, p.en)]
    texts += [
        rnd.choice(["", " "]).join(rnd.choice(pieces) for _ in range(rnd.randint(1, 8)))
        for _ in range(3000)
    ]
    for text in texts:
        assert g.find(text) == unfiltered.find(text), text


def test_find_answers_a_repeated_text_alike_and_keeps_its_own_copy():
    g = Glossary([Pair("电源管理芯片", "PMIC", "power"), Pair("电源", "power supply", "power")])
    first = g.find("电源管理芯片的电源")
    first.clear()  # a caller's list is its own
    again = g.find("电源管理芯片的电源")
    assert [(m.term, m.start) for m in again] == [("电源管理芯片", 0), ("电源", 7)]
    assert again == g._find("电源管理芯片的电源")
