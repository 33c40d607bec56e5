"""One meaning of "not found": the search's abstain decision.

With the dense channel on, nearest neighbours always exist, so "the top
hits" is never empty even when nothing in the knowledge base is about the
query. The pipeline asks the fitted abstain model
(:func:`clawkb.retrieve.abstain_model.decide`, the same one ``ask`` uses) whether
the best :data:`DEPTH` passages answer the query; when it says no, the search
returns no hits, ``abstained`` is set and the nearest passages are kept aside
(``SearchResult.nearest``) for callers that show them (``ask``).
Lexical-only searches are not judged: a term match is its own evidence; for
the same reason a query with a selective exact anchor (:mod:`clawkb.retrieve.exact`:
a hex literal, ``snake_case``, ``CamelCase``, a flag, a path, a quoted string that
few passages hold) which one of the top passages holds verbatim, or naming an
identifier a top passage holds (:func:`verbatim`), is always answered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from clawkb.text.identifiers import identifiers

if TYPE_CHECKING:
    import numpy as np

    from clawkb.kb import KnowledgeBase
    from clawkb.retrieve.abstain import Confidence
    from clawkb.retrieve.abstain_model import Asked
    from clawkb.types import Anchor, Hit

#: Passages the decision looks at, whatever the requested limit (so a search for
#: 3 hits and one for 20 decide alike, and ``ask`` decides as ``search`` does).
DEPTH = 8
#: Hits searched for an identifier of the question held verbatim.
VERBATIM_DEPTH = 3


@dataclass(frozen=True)
class _Judged:
    """A hit as the decision reads it: text fields plus the fusion's channel trace."""

    title: str
    anchor: Anchor
    text: str
    explanation: dict[str, Any]


def judge(
    kb: KnowledgeBase,
    question: str,
    hits: Sequence[Hit],
    traces: Sequence[Mapping[str, Any] | None],
    min_confidence: float | None,
    dense_scores: Sequence[float] | np.ndarray | None = None,
    asked: Asked | None = None,
) -> Confidence | None:
    """The :class:`~clawkb.retrieve.abstain.Confidence` for ``hits`` (None without hits).

    ``traces``: each hit's per-channel fusion trace (ranks, dense cosine, the exact
    stage's anchor coverage). ``min_confidence``: a threshold on P(answerable)
    replacing the model's own (0 never abstains). ``dense_scores``: the dense
    channel's cosines over its candidates (the query's background in this KB).
    ``asked``: the question's own features (:func:`prepare`), when computed already.
    """
    if not hits:
        return None
    from clawkb.retrieve.abstain_model import decide

    views = [
        _Judged(h.title, h.anchor, h.text, {"channels": dict(t or {})})
        for h, t in zip(hits[:DEPTH], traces, strict=False)
    ]
    conf = decide(kb.lexical, question, views, vectors=True, dense_scores=dense_scores,
                  asked=asked)  # fmt: skip
    if min_confidence is not None:
        conf = replace(conf, threshold=float(min_confidence))
    elif conf.abstain and (
        anchored(views[:VERBATIM_DEPTH]) or verbatim(question, hits[:VERBATIM_DEPTH])
    ):
        conf = replace(conf, value=1.0, method="identifier")
    return conf


def prepare(kb: KnowledgeBase, question: str) -> Asked:
    """What :func:`judge` reads from the question and the index alone: a search
    computes it while its query is being embedded, before any hit is known."""
    from clawkb.retrieve.abstain_model import ask

    return ask(kb.lexical, question)


def anchored(views: Sequence[_Judged]) -> bool:
    """True when one of ``views`` holds a selective exact anchor of the query verbatim
    (the exact stage traced its anchor coverage above 0)."""
    return any(
        float((v.explanation["channels"].get("exact") or {}).get("coverage") or 0.0) > 0
        for v in views
    )


def verbatim(question: str, hits: Sequence[Hit]) -> bool:
    """True when the question carries an identifier one of ``hits`` holds exactly
    (``如何使用 KEY_DIGEST`` over a page defining ``KEY_DIGEST``): the user named the
    thing, and it is there, whatever the words around it."""
    names = identifiers(question)
    return bool(names) and any(n in h.text for n in names for h in hits)
