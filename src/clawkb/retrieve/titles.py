"""Section titles matched in the embedding model's own space: the title channel.

Engineers search their docs by section titles, and in a bilingual team often
by the title in the other language ("应用程序启动流程" for "Application Startup
Flow"). The dense channel compares the query with whole passages, where the
heading is one line among many, and a small multilingual model pairs a
Chinese title with the English *passage* poorly; it pairs it with the English
*title* well: two short texts that say the same thing in two languages are
what such models are trained to pair.

So every distinct section title of the KB (the last entry of a passage's
heading path) is embedded once with
the KB's own model, as a passage, and kept beside the index
(``index/titles-<model>.npz``, :mod:`clawkb.embed.titles`: ``clawkb embed``
and the writes that embed new chunks embed the titles not seen before; a
search embeds any still missing). At search time the query vectors the dense channel already
computed (the query, and its glossary translation when it has one) are
compared with them (one matrix product), and the titles
that fit the query best give one more ranked list: the first passage of each
section they head, best title first (sections sharing one title in the order
the dense channel ranks them). It is fused with the other channels by
reciprocal ranks, like them.

**Only a query that reads like a title gets the channel.** A title counts
when its cosine with the query is at least the dense channel's top cosine
(a passage's) plus :data:`MARGIN`: a question is closer to the passage that
answers it than to any title, and then the channel is empty; a query that is
a title (in either language) is closer to that title than to any passage.
Titles and passages are embedded the same way (passage prefix), so the two
cosines are on one scale for any model. Why it generalises: every structured format
the project parses yields heading paths, the comparison uses only the KB's
own model and vectors, and the gate reads nothing of the documents.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from clawkb.embed.titles import Sections, sections, title_index
from clawkb.retrieve.fusion import Channel

if TYPE_CHECKING:
    from clawkb.retrieve.source import Scope, Source

__all__ = ["MARGIN", "TOP", "Sections", "channel", "sections", "title_index"]

#: A title enters the channel when its cosine is at least the best passage's plus this.
MARGIN = 0.0
#: Titles (and sections) the channel lists at most.
TOP = 20


def channel(
    sec: Sections,
    mat: np.ndarray,
    qvec: np.ndarray,
    dense: Channel | None,
    allowed: np.ndarray | None = None,
    hidden: np.ndarray | None = None,
) -> tuple[Channel, dict[str, Any]] | None:
    """The title channel for the query's vectors, and its trace (None: no title passes the gate).

    ``qvec``: one vector, or one row per rendering of the query (as asked, and
    its glossary translation, as the dense channel searched them); a title
    counts with its best cosine, and ``dense`` (the passages those renderings
    found) sets the floor.
    """
    if not len(sec.titles) or dense is None or not len(dense.scores):
        return None
    q = np.asarray(qvec, np.float32)
    cos = mat @ q if q.ndim == 1 else (mat @ q.T).max(axis=1)  # each title's best rendering
    floor = float(dense.scores[0]) + MARGIN
    top = np.argsort(-cos, kind="stable")[:TOP]
    top = top[cos[top] >= floor]
    if not len(top):
        return None
    dense_rank = {int(c): r for r, c in enumerate(dense.ids.tolist())}
    ids: list[int] = []
    scores: list[float] = []
    for t in top.tolist():
        starts = sec.starts[t]
        if allowed is not None:
            starts = starts[np.isin(starts, allowed)]
        if hidden is not None and len(hidden):
            starts = starts[~np.isin(starts, hidden)]
        for cid in sorted(starts.tolist(), key=lambda c: dense_rank.get(c, len(dense_rank))):
            ids.append(int(cid))
            scores.append(float(cos[t]))
            if len(ids) >= TOP:
                break
        if len(ids) >= TOP:
            break
    if not ids:
        return None
    trace = {"titles": len(top), "best": round(float(cos[top[0]]), 4), "floor": round(floor, 4)}
    return Channel(np.asarray(ids, np.int64), np.asarray(scores)), trace


def add_channel(
    source: Source, texts: Sequence[str], channels: dict[str, Channel], scope: Scope
) -> str | None:
    """The pipeline's hook: add ``channels["titles"]`` when ``source`` has the ``titles``
    capability (the KB's own vectors) and a dense channel; a trace note."""
    dense = channels.get("dense")
    if "titles" not in source.capabilities or dense is None or not len(dense.ids):
        return None
    r = source.retriever
    index = r.dense_index()
    qv = r.qvec_cache.get((index.mkey, *texts))
    if qv is None:
        return None
    sec, mat = title_index(source.kb, r.embedder, index.mkey)
    got = channel(sec, mat, np.asarray(qv), dense, scope.allowed, scope.hidden)
    if got is None:
        return None
    channels["titles"], trace = got
    return " ".join(f"{k}={v}" for k, v in trace.items())
