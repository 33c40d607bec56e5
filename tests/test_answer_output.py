"""`ask` output (issue 13 item 7): sources numbered in reading order, invented
citations removed with their clause, and a stream that is final as it arrives.

The model is a scripted client behind the real ``ChatClient`` interface (no
LLM runs here); retrieval, context and citation checks are the real ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from clawkb.answer import answer
from clawkb.answer.citations import CitationStream, check_citations, reading_order, renumber
from clawkb.kb import KnowledgeBase, TextRecord
from clawkb.llm import ChatReply


class Scripted:
    """Replies with a fixed text, streamed in pieces of ``step`` characters."""

    name = "scripted"

    def __init__(self, text: str, step: int = 3) -> None:
        self.text, self.step = text, step

    def chat(self, messages: Sequence[object], *, on_token=None) -> ChatReply:  # type: ignore[no-untyped-def]
        if on_token is not None:
            for i in range(0, len(self.text), self.step):
                on_token(self.text[i : i + self.step])
        return ChatReply(self.text, "scripted")


@pytest.fixture()
def kb(tmp_path: Path):  # type: ignore[no-untyped-def]
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index_texts(
            [
                TextRecord(f"r{i}.md", f"# Relay K{i}\n\nRelay K{i} switches the pump {i} supply.")
                for i in range(1, 6)
            ]
        )
        yield kb


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("Also see [7] and [2].", "Also see [2]."),
        ("Use PA5 [2] and [7]. Also see [8].", "Use PA5 [2]."),
        ("It is 120Ω [3]. See also [99] and [2, 42].", "It is 120Ω [3]. See also [2]."),
        ("阻抗为 100Ω [1]。参见 [9]。", "阻抗为 100Ω [1]。"),
        ("Both (see [9]) hold [1].", "Both hold [1]."),
    ],
)
def test_invented_citation_leaves_with_its_clause(raw: str, clean: str) -> None:
    check = check_citations(raw, range(1, 4))
    assert check.text == clean
    assert check.removed and all(n > 3 for n in check.removed)


@pytest.mark.parametrize("step", [1, 2, 5, 11, 1000])
def test_stream_equals_final_text(step: int) -> None:
    raw = "Pump 4 [4] uses K4. It is 120Ω [3]. See also [99] and [2, 42]. Also [4]."
    final = check_citations(raw, range(1, 6))
    final_text = renumber(final.text, reading_order(final.cited, 5))
    out: list[str] = []
    stream = CitationStream(range(1, 6), out.append)
    for i in range(0, len(raw), step):
        stream.feed(raw[i : i + step])
    stream.close()
    assert (
        "".join(out) == final_text == "Pump 4 [1] uses K4. It is 120Ω [2]. See also [3]. Also [1]."
    )


def test_sources_numbered_in_reading_order_cited_first(kb: KnowledgeBase) -> None:
    q = "Which relay switches the pump supply?"
    plain = answer(kb, q, llm="none")
    n = len(plain.passages)
    assert n >= 3
    reply = f"The pump is switched by the last relay [{n}], or the next [{n - 1}]."
    res = answer(kb, q, llm=Scripted(reply))
    assert res.cited == [1, 2]
    assert [p.n for p in res.passages] == list(range(1, n + 1))
    assert res.text == "The pump is switched by the last relay [1], or the next [2]."
    by_anchor = {p.anchor.id: p.n for p in plain.passages}
    assert by_anchor[res.passages[0].anchor.id] == n  # what was [n] is now [1]
    assert by_anchor[res.passages[1].anchor.id] == n - 1
    assert [p.n for p in res.citations] == [1, 2]


def test_streamed_answer_is_the_final_answer(kb: KnowledgeBase) -> None:
    q = "Which relay switches the pump supply?"
    reply = "Relay K2 switches it [3]. Also see [12] and [1]."
    pieces: list[str] = []
    res = answer(kb, q, llm=Scripted(reply, step=4), on_token=pieces.append)
    assert "".join(pieces).strip() == res.text == "Relay K2 switches it [1]. Also see [2]."
    assert res.removed_citations == [12]
