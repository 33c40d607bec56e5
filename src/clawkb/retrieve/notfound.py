"""One meaning of "not found": the search's abstain decision.

With the dense channel on, nearest neighbours always exist, so "the top
hits" is never empty even when nothing in the knowledge base is about the
query. The pipeline asks the fitted abstain model
(:func:`clawkb.answer.abstain_model.decide`, the same one ``ask`` uses) whether
the best :data:`DEPTH` passages answer the query; when it says no, the search
returns no hits, ``abstained`` is set and the nearest passages are kept aside
(``SearchResult.nearest``) for callers that show them (``ask``).
Lexical-only searches are not judged: a term match is its own evidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase
    from clawkb.types import Hit

#: Passages the decision looks at, whatever the requested limit (so a search for
#: 3 hits and one for 20 decide alike, and ``ask`` decides as ``search`` does).
DEPTH = 8


@dataclass(frozen=True)
class _Judged:
    """A hit as the decision reads it: text fields plus the fusion's channel trace."""

    title: str
    anchor: Any
    text: str
    explanation: dict[str, Any]


def judge(
    kb: KnowledgeBase,
    question: str,
    hits: Sequence[Hit],
    traces: Sequence[Mapping[str, Any] | None],
    min_confidence: float | None,
) -> Any | None:
    """The :class:`~clawkb.answer.abstain.Confidence` for ``hits`` (None without hits).

    ``traces``: each hit's per-channel fusion trace (ranks, dense cosine).
    ``min_confidence``: a threshold on P(answerable) replacing the model's own
    (0 never abstains).
    """
    if not hits:
        return None
    from clawkb.answer.abstain_model import decide

    views = [
        _Judged(h.title, h.anchor, h.text, {"channels": dict(t or {})})
        for h, t in zip(hits[:DEPTH], traces, strict=False)
    ]
    conf = decide(kb.lexical, question, views, vectors=True)
    if min_confidence is not None:
        conf = replace(conf, threshold=float(min_confidence))
    return conf
