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

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from clawkb.embed.titles import Sections, sections, title_index
from clawkb.retrieve.fusion import Channel, Fused

if TYPE_CHECKING:
    from clawkb.retrieve.rewrite import Rewritten
    from clawkb.retrieve.source import Scope, Source

__all__ = ["MARGIN", "TOP", "Sections", "channel", "sections", "title_index"]

#: A title enters the channel when its cosine is at least the best passage's plus this.
MARGIN = 0.0
#: Titles (and sections) the channel lists at most.
TOP = 20
#: A title in the other language leads when its cosine is at least the best
#: passage's plus this (fitted on the dev halves of esp-idf-docs: -0.01 against
#: 0 and -0.02; see :func:`lead`).
LEAD_MARGIN = -0.01
#: The best other-script title also leads when its cosine is at least the best passage's
#: plus this and it stands :data:`LEAD_GAP` clear of the next other-script title (a
#: confident pairing; both fitted on the dev halves of esp-idf-docs, see :func:`lead`).
LEAD_FLOOR = -0.04
#: How far the best other-script title must be ahead of the next for :data:`LEAD_FLOOR`.
LEAD_GAP = 0.01
#: Titles that may lead: the best, and the runner-up when it passes :data:`MARGIN`
#: (fitted on the dev halves of esp-idf-docs against the best alone and the best three).
RUNNERS = 2
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
#: Per title list (by identity): which titles contain a Chinese character (a few KBs kept).
_SCRIPT: dict[int, tuple[list[str], np.ndarray]] = {}
#: Per (title list, query script): the indices of the titles in the other script.
_OTHER: dict[tuple[int, bool], tuple[list[str], np.ndarray]] = {}


def channel(
    sec: Sections,
    mat: np.ndarray,
    qvec: np.ndarray,
    dense: Channel | None,
    allowed: np.ndarray | None = None,
    hidden: np.ndarray | None = None,
    sims: np.ndarray | None = None,
) -> tuple[Channel, dict[str, Any]] | None:
    """The title channel for the query's vectors, and its trace (None: no title passes the gate).

    ``qvec``: one vector, or one row per rendering of the query (as asked, and
    its glossary translation, as the dense channel searched them); a title
    counts with its best cosine, and ``dense`` (the passages those renderings
    found) sets the floor.
    """
    if not len(sec.titles) or dense is None or not len(dense.scores):
        return None
    sims = _sims(mat, qvec) if sims is None else sims  # (given: computed once per search)
    cos = sims.max(axis=1)  # each title's best rendering
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


def lead(
    sec: Sections,
    cos: np.ndarray,
    dense: Channel,
    query_chinese: bool,
    allowed: np.ndarray | None = None,
    hidden: np.ndarray | None = None,
) -> list[tuple[int, str]]:
    """[(first passage, title), ...]: the sections a title query in the other language names.

    A query that is a section title in the other language than the KB's
    (a Chinese title over English docs, and back) reaches its section through
    the title channel: e5-small pairs a title with its translation well. But
    as one list among three fused by reciprocal ranks, that title's top rank
    is outvoted by passages both other channels rank middling (on esp-idf-docs,
    zh2en, the right section was the best title for 44 of the 94 queries the
    default missed). So the best title *written in the other script* than the
    query (``cos``: each title's cosine with the query as asked, not its glossary
    rendering) leads the fused list when its cosine is at least the dense
    channel's top cosine plus :data:`LEAD_MARGIN`: the query is closer to that title than (about) to any
    passage, so it reads as that title's translation. Of the sections that
    title heads, the one the dense channel ranks first leads.

    **The runner-up.** A small model often ranks a title's translation second,
    a hair behind a near-synonym ("使用中断": "Using the Interrupt Dispatch
    Method" .869, "Use Interrupts" .868). When the lead fires, the second-best
    other-script title follows it when it passes the title channel's own gate
    (its cosine at least the dense top's plus :data:`MARGIN`, stricter than the
    lead's): two titles that both beat every passage are both read as the
    query's translation, and the fused list loses one rank, not its top.

    **A clear pairing.** When the best other-script title stands
    :data:`LEAD_GAP` clear of the next one, the model is sure which title the
    query translates, and the best passage may be somewhat closer
    (:data:`LEAD_FLOOR` instead of :data:`LEAD_MARGIN`): "eFuse Usage" →
    "使用 eFuse" .895, next title .877, best passage .906. Both tiers compare
    cosines of one model on one scale; on the dev halves the gap tier added
    two right leads and no wrong one.

    Why only the other script: a title in the query's own script that beats
    every passage is mostly a short name sharing the query's words ("GPIO"
    for "GPIO Bundle Operations"), which the heading stage matches lexically;
    on the dev half of en2zh such titles were the right section 9 % of the time
    against 84 % for Chinese titles. Nothing reads a page of one set: two
    cosines of the KB's own model and the script of a title.
    """
    if not len(sec.titles) or not len(dense.scores):
        return []
    other = _other_script(sec, query_chinese)
    if not len(other):
        return []
    oc = cos[other]
    n = min(max(RUNNERS, 2), len(oc))  # the best few: a partition, not a sort of every title
    part = np.argpartition(-oc, n - 1)[:n] if n < len(oc) else np.arange(len(oc))
    order = part[np.argsort(-oc[part], kind="stable")]
    top = float(dense.scores[0])
    gap = float(oc[order[0]] - oc[order[1]]) if len(order) > 1 else 0.0  # one: no pairing to judge
    first_gate = LEAD_FLOOR if gap >= LEAD_GAP else LEAD_MARGIN
    rank = {int(c): r for r, c in enumerate(dense.ids.tolist())}
    out: list[tuple[int, str]] = []
    for i, o in enumerate(order[:RUNNERS].tolist()):
        if float(oc[o]) < top + (first_gate if i == 0 else MARGIN):
            break
        t = int(other[o])
        starts = sec.starts[t]
        if allowed is not None:
            starts = starts[np.isin(starts, allowed)]
        if hidden is not None and len(hidden):
            starts = starts[~np.isin(starts, hidden)]
        if not len(starts):
            break
        first = min(starts.tolist(), key=lambda c: rank.get(c, len(rank)))
        if all(first != c for c, _ in out):
            out.append((int(first), sec.titles[t]))
    return out


def _sims(mat: np.ndarray, qvec: np.ndarray) -> np.ndarray:
    """Cosines of every title (rows) with each rendering of the query (columns)."""
    q = np.asarray(qvec, np.float32)
    return (mat @ q)[:, None] if q.ndim == 1 else mat @ q.T


def _chinese_titles(sec: Sections) -> np.ndarray:
    """Which of ``sec``'s titles contain a Chinese character (computed once per title list)."""
    got = _SCRIPT.get(id(sec.titles))
    if got is None or got[0] is not sec.titles:
        if len(_SCRIPT) >= 16:
            _SCRIPT.clear()
        mask = np.fromiter((bool(_CJK.search(t)) for t in sec.titles), bool, len(sec.titles))
        got = _SCRIPT[id(sec.titles)] = (sec.titles, mask)
    return got[1]


def _other_script(sec: Sections, query_chinese: bool) -> np.ndarray:
    """Indices of ``sec``'s titles in the other script than the query (kept per title list)."""
    key = (id(sec.titles), query_chinese)
    got = _OTHER.get(key)
    if got is None or got[0] is not sec.titles:
        if len(_OTHER) >= 32:
            _OTHER.clear()
        got = _OTHER[key] = (sec.titles, np.flatnonzero(_chinese_titles(sec) != query_chinese))
    return got[1]


def query_chinese(rw: Rewritten) -> bool:
    """True when most of the query's own tokens (not its translations) are Chinese."""
    own = rw.tokens[: len(rw.tokens) - rw.n_glossary]
    return bool(own) and sum(1 for t in own if _CJK.search(t)) / len(own) >= 0.5


def put_first(
    fused: list[Fused], chunk_ids: int | Sequence[int], cosine: float | None = None
) -> list[Fused]:
    """``fused`` with ``chunk_ids`` first, in that order (added when no channel listed them);
    ``cosine``: the leading title's cosine with the query, kept in the first one's trace
    (``lead_raw``, read by the not-found decision)."""
    ids = [chunk_ids] if isinstance(chunk_ids, int) else list(chunk_ids)
    for n, cid in enumerate(reversed(ids)):
        got = next((f for f in fused if f.chunk_id == cid), None) or Fused(cid, 0.0)
        trace = got.trace.setdefault("titles", {})
        trace["lead"] = True
        if cosine is not None and n == len(ids) - 1:
            trace["lead_raw"] = round(float(cosine), 6)
        if fused and fused[0] is got:
            continue
        got.score = (fused[0].score if fused else 0.0) + 1e-6
        fused = [got, *(f for f in fused if f is not got)]
    return fused


def add_channel(
    source: Source,
    texts: Sequence[str],
    channels: dict[str, Channel],
    scope: Scope,
    query_chinese: bool | None = None,
) -> tuple[str | None, list[int], float | None]:
    """The pipeline's hook: add ``channels["titles"]`` when ``source`` has the ``titles``
    capability (the KB's own vectors) and a dense channel; (a trace note, the passages
    a cross-language title query leads with, best first: :func:`lead`, and the leading
    title's cosine, or None)."""
    dense = channels.get("dense")
    if "titles" not in source.capabilities or dense is None or not len(dense.ids):
        return None, [], None
    r = source.retriever
    index = r.dense_index()
    qv = r.qvec_cache.get((index.mkey, *texts))
    if qv is None:
        return None, [], None
    sec, mat = title_index(source.kb, r.embedder, index.mkey)
    if not len(sec.titles):
        return None, [], None
    qv = np.asarray(qv)
    sims = _sims(mat, qv)  # one product for the channel and the lead
    first: list[int] = []
    first_cos: float | None = None
    notes = []
    if query_chinese is not None:  # the query as asked (column 0), not its glossary rendering
        for cid, title in lead(sec, sims[:, 0], dense, query_chinese, scope.allowed, scope.hidden):
            first.append(cid)
            notes.append(f"lead={title!r}")
        if first:  # the lead title's cosine: the best other-script one (what lead() compared)
            first_cos = float(sims[_other_script(sec, query_chinese), 0].max())
    got = channel(sec, mat, qv, dense, scope.allowed, scope.hidden, sims=sims)
    if got is not None:
        channels["titles"], trace = got
        notes = [f"{k}={v}" for k, v in trace.items()] + notes
    return (" ".join(notes) or None), first, first_cos
