"""Known-answer checks for ``ask``: citation precision and extractive hit rate.

A question file (``examples/questions.yaml``) lists questions with a fact
string their answer rests on. Two measures, both traceable per question:

* citation precision — of all ``[n]`` an answer returns, the share whose
  passage contains the fact (target 100% with the test LLM server);
* extractive top-sentence rate — the share of questions whose best extracted
  sentence contains the fact (target >= 80%).

Facts are compared after NFKC, case folding and removing Markdown ``**``/````.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawkb.answer.core import answer
from clawkb.errors import ConfigError
from clawkb.llm import ChatClient

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

__all__ = ["KnownAnswer", "contains_fact", "evaluate_answers", "load_questions"]


@dataclass(frozen=True)
class KnownAnswer:
    question: str
    fact: str
    expect_path: str = ""


@dataclass
class QuestionSet:
    questions: list[KnownAnswer]
    unanswerable: list[str] = field(default_factory=list)


def load_questions(path: str | Path) -> QuestionSet:
    """Read a question file; a malformed entry is an error naming its index."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read questions ({exc})") from exc
    items = data.get("questions") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{path}: expected a non-empty `questions:` list")
    out = []
    for i, q in enumerate(items):
        if not isinstance(q, dict) or not q.get("question") or not q.get("answer"):
            raise ConfigError(f"{path}: questions[{i}] needs `question` and `answer`")
        out.append(KnownAnswer(str(q["question"]), str(q["answer"]), str(q.get("expect_path", ""))))
    return QuestionSet(out, [str(u) for u in data.get("unanswerable") or []])


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold().replace("**", "").replace("`", "")


def contains_fact(text: str, fact: str) -> bool:
    return _norm(fact) in _norm(text)


def evaluate_answers(
    kb: KnowledgeBase, qs: QuestionSet, llm: ChatClient | None, limit: int = 8
) -> dict[str, Any]:
    """Run every question; report citation precision (LLM) or top-sentence rate (extractive)."""
    rows = []
    good = total = top_hits = 0
    for q in qs.questions:
        res = answer(kb, q.question, llm=llm if llm is not None else "none", limit=limit)
        by_n = {p.n: p for p in res.passages}
        ok = [contains_fact(by_n[n].text, q.fact) for n in res.cited]
        good += sum(ok)
        total += len(ok)
        first = res.text.splitlines()[0] if res.text else ""
        top = contains_fact(first, q.fact)
        top_hits += top
        rows.append(
            {
                "question": q.question,
                "mode": res.mode,
                "cited": res.cited,
                "citations_with_fact": sum(ok),
                "top_sentence_has_fact": top,
                "answer": res.text,
                "overhead_ms": round(res.timings["overhead"], 3),
            }
        )
    abstained = [answer(kb, u, llm="none").abstained for u in qs.unanswerable]
    return {
        "questions": len(qs.questions),
        "citations": total,
        "citation_precision": good / total if total else 0.0,
        "answered_with_citation": sum(1 for r in rows if r["cited"]) / len(rows),
        "top_sentence_rate": top_hits / len(rows),
        "unanswerable_abstained": sum(abstained) / len(abstained) if abstained else None,
        "rows": rows,
    }
