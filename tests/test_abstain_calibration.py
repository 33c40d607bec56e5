"""`ask` confidence: word forms and glossary translations count, off-topic still abstains."""

from __future__ import annotations

import pytest

from clawkb.answer import answer
from clawkb.kb import KnowledgeBase, TextRecord
from clawkb.retrieve.abstain import (
    DEFAULT_MIN_CONFIDENCE,
    coverage,
    question_terms,
    retrieval_confidence,
)
from clawkb.text import tokenize

SANDBOX = """# Sandboxing

Every command the agent runs goes through a sandbox backend chosen per platform.

| Platform | Backend | Notes |
|----------|---------|-------|
| Linux | bubblewrap (bwrap) or Landlock | needs unprivileged user namespaces |
| macOS | Seatbelt (sandbox-exec) | built into the OS |
| Windows | AppContainer | experimental |

Set `sandbox.backend` in the config file to force one.
"""

OTHER = {
    "cron.md": "# Scheduled jobs\n\nJobs run from the scheduler; each job has a cron expression.",
    "memory.md": "# Memory store\n\nThe memory backend keeps facts in SQLite with a TTL per entry.",
    "gateway.md": "# Gateway API\n\nAuthentication: every request needs a bearer token header.",
    "install.md": "# Install\n\nInstall the package on Linux, macOS or Windows with pip.",
    "impedance.md": "# DDR layout\n\nDifferential pairs are routed at 100 ohm impedance.",
}


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with KnowledgeBase.open(tmp_path_factory.mktemp("abstain") / "kb", create=True) as kb:
        kb.index_texts(
            [TextRecord(path="sandbox.md", text=SANDBOX)]
            + [TextRecord(path=p, text=t) for p, t in OTHER.items()]
        )
        yield kb


def test_sandbox_backends_table_is_answered(kb) -> None:  # type: ignore[no-untyped-def]
    q = "Which sandbox backends are supported on Linux?"
    res = answer(kb, q, llm="none", explain=True)
    assert not res.abstained, res.confidence.to_dict() if res.confidence else None
    table = next(p.n for p in res.passages if p.anchor.path == "sandbox.md")
    assert table in res.cited
    # the literal tokens alone would not have been enough: "backends", "sandboxing"
    terms = question_terms(kb.lexical, q)
    raw = coverage(terms, frozenset(tokenize(SANDBOX)))
    assert res.confidence is not None and res.confidence.method == "model"
    assert raw < DEFAULT_MIN_CONFIDENCE <= res.confidence.features["coverage"]


def test_chinese_question_credits_english_passage_through_glossary(kb) -> None:  # type: ignore[no-untyped-def]
    q = "网关 API 认证令牌放在哪里？"
    terms = question_terms(kb.lexical, q)
    text = OTHER["gateway.md"]
    assert retrieval_confidence(terms, [text]).value < DEFAULT_MIN_CONFIDENCE
    assert retrieval_confidence(terms, [text], question=q).value >= DEFAULT_MIN_CONFIDENCE


@pytest.mark.parametrize(
    "q",
    [
        "Which sandbox backends are supported on Android phones?",
        "What is the boiling point of ethanol?",
        "如何申请美国签证？",
    ],
)
def test_off_topic_questions_still_abstain(kb, q) -> None:  # type: ignore[no-untyped-def]
    assert answer(kb, q, llm="none").abstained
