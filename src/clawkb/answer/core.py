"""``answer(kb, question)``: retrieve, check confidence, build context, answer, cite.

Three outcomes, one result type (:class:`Answer`):

* ``abstain`` — retrieval confidence is below the threshold: the text is
  "not found in the knowledge base" and the nearest passages are returned;
* ``extractive`` — no LLM is configured: the best sentences of the top
  passages, each cited;
* ``llm`` — the role's prompt over the numbered passages goes to the chat
  client; invalid ``[n]`` citations in the reply are removed and reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from clawkb.answer.citations import CitationStream, check_citations, reading_order, renumber
from clawkb.answer.context import Passage, build_context
from clawkb.answer.extractive import extract_answer, render_extractive
from clawkb.answer.roles import DEFAULT_ROLE, Role, load_role, render_messages
from clawkb.errors import ConfigError
from clawkb.llm import ChatClient, load_llm_settings, make_client
from clawkb.retrieve.abstain import (
    DEFAULT_MIN_CONFIDENCE,
    DENSE_MIN_CONFIDENCE,
    NOT_FOUND,
    Confidence,
    dense_top,
    has_vectors,
    question_terms,
    retrieval_confidence,
)
from clawkb.retrieve.abstain_model import model_confidence
from clawkb.retrieve.hits import hit_dict

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

__all__ = ["Answer", "answer"]

Mode = Literal["llm", "extractive", "abstain"]


@dataclass
class Answer:
    """An answer with everything needed to trust (or distrust) it."""

    question: str
    mode: Mode
    text: str
    passages: list[Passage]
    cited: list[int] = field(default_factory=list)
    removed_citations: list[int] = field(default_factory=list)
    confidence: Confidence | None = None
    role: str = DEFAULT_ROLE
    model: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    explanation: dict[str, Any] | None = None

    @property
    def abstained(self) -> bool:
        return self.mode == "abstain"

    @property
    def citations(self) -> list[Passage]:
        """The passages the answer cites, in order of first citation."""
        by_n = {p.n: p for p in self.passages}
        return [by_n[n] for n in self.cited if n in by_n]

    @property
    def flagged(self) -> dict[int, list[str]]:
        """Passage number -> prompt-injection flags, for passages that have any."""
        return {p.n: list(p.flags) for p in self.passages if p.flags}

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "mode": self.mode,
            "answer": self.text,
            "abstained": self.abstained,
            "role": self.role,
            "model": self.model,
            "citations": [
                {k: v for k, v in p.to_dict().items() if k != "text"} for p in self.citations
            ],
            "removed_citations": self.removed_citations,
            "confidence": self.confidence.to_dict() if self.confidence else None,
            "passages": [p.to_dict() for p in self.passages],
            "injection_flags": {str(n): f for n, f in self.flagged.items()},
            "timings_ms": {k: round(v, 3) for k, v in self.timings.items()},
            "warnings": self.warnings,
            "explanation": self.explanation,
        }


def answer(
    kb: KnowledgeBase,
    question: str,
    *,
    limit: int = 8,
    role: str | None = None,
    llm: ChatClient | Literal["auto", "none"] | None = "auto",
    budget_tokens: int | None = None,
    min_confidence: float | None = None,
    on_token: Callable[[str], None] | None = None,
    path_glob: str | Sequence[str] | None = None,
    explain: bool = False,
) -> Answer:
    """Answer ``question`` from ``kb`` with numbered, checked citations.

    ``llm="auto"`` uses the configured endpoint (``config.yaml`` ``llm:`` or
    ``CLAWKB_LLM_*``) and falls back to an extractive answer when none is set;
    ``"none"``/``None`` forces extractive; a :class:`ChatClient` is used as is.
    ``on_token`` streams model output (LLM mode only). ``budget_tokens`` and
    ``min_confidence`` default to ``answer.context_tokens`` /
    ``answer.min_confidence`` in ``config.yaml``. Raises ``LLMError`` only when
    a configured model fails; never for "no answer" (that is ``abstain``).
    """
    if not question.strip():
        raise ConfigError("the question is empty")
    if limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}")
    opts = kb.config.answer  # validated by the settings model
    budget = budget_tokens or opts.context_tokens
    if min_confidence is not None:
        threshold = min_confidence
    else:
        threshold = DEFAULT_MIN_CONFIDENCE if opts.min_confidence is None else opts.min_confidence
    role_obj = load_role(role or opts.role or DEFAULT_ROLE, kb.home)
    client = _client(kb, llm)
    t0 = time.perf_counter()
    vectors = has_vectors(kb.conn)  # crossling: the dense cosine joins the confidence
    res = kb.search(question, limit=limit, path_glob=path_glob, explain=explain or vectors)
    t1 = time.perf_counter()
    terms = question_terms(kb.lexical, question)
    found = res.hits or res.nearest  # an abstained search keeps its nearest passages aside
    cos = dense_top(found) if vectors else None
    texts = [" ".join((h.title, *h.anchor.heading_path, h.text)) for h in found]
    # crossling: the fitted model, unless a threshold is set or the KB is remote (Milvus
    # keeps no term statistics to compute its features from)
    fitted = min_confidence is None and opts.min_confidence is None
    if fitted and res.decision is not None:  # the search's own decision (notfound.py)
        conf = res.decision
    elif fitted and not getattr(kb, "remote", False):
        conf = model_confidence(kb.lexical, question, found, terms, texts, cos, vectors)
    else:
        if cos is not None and min_confidence is None and opts.min_confidence is None:
            threshold = DENSE_MIN_CONFIDENCE
        conf = retrieval_confidence(terms, texts, threshold, question, cos)
    passages = build_context(kb.repo, found, budget_tokens=budget, max_passages=limit)
    t2 = time.perf_counter()
    out = Answer(question, "abstain", NOT_FOUND, passages, confidence=conf, role=role_obj.name)
    out.warnings = list(res.warnings)
    if explain:
        out.explanation = {
            "query_tokens": res.query_tokens,
            "terms": {t.text: round(t.weight, 4) for t in terms},
            "confidence": conf.to_dict(),
            "hits": [hit_dict(h) for h in found],
            "budget_tokens": budget,
        }
    if not passages or conf.abstain:
        out.cited = []
    elif client is None:
        sentences = extract_answer(passages, terms)
        out.mode, out.text = "extractive", render_extractive(sentences)
        out.cited = list(dict.fromkeys(s.n for s in sentences))
        _number_in_reading_order(out)
        if explain and out.explanation is not None:
            out.explanation["sentences"] = [s.__dict__ for s in sentences]
    else:
        _ask_model(out, client, role_obj, on_token)
    t3 = time.perf_counter()
    llm_ms = out.timings.pop("llm", 0.0)
    out.timings.update(
        search=(t1 - t0) * 1000,
        context=(t2 - t1) * 1000,
        llm=llm_ms,
        total=(t3 - t0) * 1000,
        overhead=(t3 - t0) * 1000 - llm_ms,
    )
    return out


def _ask_model(
    out: Answer, client: ChatClient, role: Role, on_token: Callable[[str], None] | None
) -> None:
    messages = render_messages(role, out.question, out.passages)
    valid = range(1, len(out.passages) + 1)
    stream = CitationStream(valid, on_token) if on_token is not None else None
    t = time.perf_counter()
    reply = client.chat(messages, on_token=stream.feed if stream is not None else None)
    if stream is not None:
        stream.close()
    out.timings["llm"] = (time.perf_counter() - t) * 1000
    check = check_citations(reply.text, valid)
    out.mode, out.text, out.model = "llm", check.text.strip(), reply.model
    out.cited, out.removed_citations = check.cited, check.removed
    _number_in_reading_order(out)
    if check.removed:
        out.warnings.append(
            "removed citations to passages that were not in the context: "
            + ", ".join(f"[{n}]" for n in check.removed)
        )
    if not check.cited and NOT_FOUND not in out.text.lower():
        out.warnings.append("the model's answer cites no passage; treat it with care")
    if out.explanation is not None:
        out.explanation["messages"] = messages


def _number_in_reading_order(out: Answer) -> None:
    """Renumber the passages so the cited ones come first, [1], [2], ... in order of
    first citation (what a reader meets), and rewrite the answer's citations to match."""
    mapping = reading_order(out.cited, len(out.passages))
    out.text = renumber(out.text, mapping)
    out.cited = [mapping[n] for n in out.cited]
    out.passages = sorted((replace(p, n=mapping[p.n]) for p in out.passages), key=lambda p: p.n)


def _client(kb: KnowledgeBase, llm: ChatClient | str | None) -> ChatClient | None:
    if llm is None or llm == "none":
        return None
    if llm == "auto":
        return make_client(load_llm_settings(kb.config))
    if isinstance(llm, str):
        raise ConfigError(f"llm must be 'auto', 'none' or a ChatClient, got {llm!r}")
    return llm
