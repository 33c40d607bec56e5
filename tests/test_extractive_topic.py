"""Extractive answers keep only sentences on the question's topic (issue 19 item 6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawkb.answer import answer
from clawkb.answer.context import build_context
from clawkb.answer.extractive import extract_answer
from clawkb.kb import KnowledgeBase
from clawkb.retrieve.abstain import question_terms

POWER = """# 电源设计

## AMS1117 稳压器

AMS1117-3.3 的输入电压范围为 4.5V 至 15V，输出 3.3V。
压差约 1.1V，输入电压低于 4.5V 时输出不稳定。
AMS1117 最大输出电流 1A，需要在输入端放置 10µF 电容。

## 板载指示灯

电源指示灯串联 1kΩ 电阻。
"""

GPIO = """# GPIO 说明

## 复位状态

复位后所有引脚为模拟输入模式。
输入模式下引脚的上拉电阻默认关闭。

## 输出速度

输出速度寄存器控制引脚的翻转速率。
"""

REGS = """# GPIO registers

| Register | Offset | Reset value |
|---|---|---|
| GPIOA_MODER | 0x00 | 0xA800_0000 |
| GPIOB_MODER | 0x00 | 0x0000_0280 |
"""

UART = """# UART notes

## Baud rate

The UART baud rate is set by the BRR register.
Input clock for USART2 is APB1.
"""


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("topic")
    docs = root / "docs"
    docs.mkdir()
    (docs / "power.md").write_text(POWER, "utf-8")
    (docs / "gpio.md").write_text(GPIO, "utf-8")
    (docs / "uart.md").write_text(UART, "utf-8")
    (docs / "regs.md").write_text(REGS, "utf-8")
    with KnowledgeBase.open(root / ".clawkb", create=True) as kb:
        kb.index([docs])
        yield kb


def test_unrelated_sentence_sharing_a_common_word_is_left_out(kb) -> None:  # type: ignore[no-untyped-def]
    res = answer(kb, "AMS1117 的输入电压是多少？", llm="none")
    assert res.mode == "extractive", res.text
    lines = res.text.splitlines()
    assert "4.5V 至 15V" in lines[0]
    # the GPIO reset note shares 输入 with the question but is about something else
    assert "复位" not in res.text and "模拟输入" not in res.text
    assert all(p.anchor.path.endswith("power.md") for p in res.citations)


def test_several_on_topic_sentences_are_kept(kb) -> None:  # type: ignore[no-untyped-def]
    res = answer(kb, "AMS1117 input voltage 输入电压 压差", llm="none")
    assert res.mode == "extractive"
    assert len(res.text.splitlines()) >= 2, res.text
    assert "复位" not in res.text


def test_extract_answer_rule_directly(kb) -> None:  # type: ignore[no-untyped-def]
    """The same passages with and without the topic filter: only the topic differs."""
    hits = kb.search("AMS1117 输入电压 复位 引脚", limit=5).hits
    passages = build_context(kb.repo, hits, budget_tokens=2000, max_passages=5)
    assert {Path(p.anchor.path).name for p in passages} >= {"power.md", "gpio.md"}
    terms = question_terms(kb.lexical, "AMS1117 的输入电压是多少？")
    got = extract_answer(passages, terms, max_sentences=5)
    assert got and "AMS1117" in got[0].text
    assert all("复位" not in s.text for s in got)
    # a question about the reset state now has that topic: the GPIO sentence leads
    terms = question_terms(kb.lexical, "复位后引脚是什么模式？")
    got = extract_answer(passages, terms, max_sentences=5)
    assert got and "复位后所有引脚为模拟输入模式" in got[0].text
    assert all("AMS1117" not in s.text for s in got)


def test_an_identifier_sharing_a_part_is_another_topic(kb) -> None:  # type: ignore[no-untyped-def]
    res = answer(kb, "What is the reset value of GPIOA_MODER?", llm="none")
    assert res.mode == "extractive" and "0xA800_0000" in res.text.splitlines()[0]
    assert "GPIOB_MODER" not in res.text  # shares MODER and "reset value", not the register
