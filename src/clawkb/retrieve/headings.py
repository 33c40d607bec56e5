"""A query that is a section title finds that section: the heading-match stage.

Engineers search their docs by the words of a heading ("Prerequisites",
"Flash Encryption", "应用程序启动流程"). BM25F sees the heading path as one
field: a generic title ("Summary") matches every longer heading that contains
the word, and a short parent section whose path also contains it can outrank
the section itself. What the user typed says more than that: the query *is*
a heading, and the passage whose own (last) heading says the same thing is
the answer.

The rule, the same for Markdown, reStructuredText, HTML or PDF headings:

* A candidate's **headings** are the last entry of its heading path, plus
  the parent entry when the passage begins with the parent's heading line (the
  chunker glues a heading-only section to its first subsection; that passage
  starts the parent section too).
* **Match** of the query against a heading is the F1 of two IDF-weighted
  coverages over the index's own tokens: how much of the query the heading
  holds, and how much of the heading the query holds. A query that spells the
  whole heading and nothing else scores 1; "Summary" against "Summary of
  changes" scores less than against "Summary". A cross-lingual query is
  matched through its glossary translation too (the better of the two counts):
  the translation plus the query's words it does not stand for (identifiers,
  Latin words in a Chinese query, words the glossary could not translate), so
  translating the filler of "X 怎么配置" cannot make a "Configuration" heading
  look like the answer, nor translating one word of "硬件栈保护" a "Hardware" one.
* **Floor.** A passage is lifted only when the query is (nearly) its heading:
  both coverages must reach ``floor`` (``retrieval.headings_floor``, 0.8,
  fitted on the dev half of the section titles of esp-idf-docs, see
  bench/results/formats-latest.md). A title typed as it reads, or with a word
  left out, clears it; a question that mentions a heading's words does not
  ("How much flash memory does the STM32F401RE have?" holds under half of
  "STM32F401RE memory map and registers", and that heading is under half of
  the question), so its answering passage keeps its place. This is what lets
  the stage be on by default. ``floor`` 0 lifts any heading that shares a word.
* **Combining** treats the match as one more ranked list over the candidates
  (best match first, only matches that clear the floor) fused with the ranking it is
  given by reciprocal ranks, the way the project fuses its channels; no weight
  is fitted. A full match (1.0) of the query's own words is a tier of its
  own: those passages come first, in the order the channels gave them (a
  glossary translation is a guess, never a full match). The reordered list keeps the scores'
  scale (the i-th passage gets the i-th best score), so confidence and the
  not-found judgement read what they read before.

The exact-match stage (exact.py) runs first and its tiers hold: the heading
match reorders passages within one identifier-coverage level, never across.

A query made only of identifiers (``SOC_CLK_RC_FAST_D256_SUPPORTED``) is a
spelling, not a title: the stage leaves it to the exact-match stage, and the
pieces of the identifier never lift a heading that happens to share one.

Only the first :data:`DEPTH` candidates are looked at (their rows are read
from the store); a query that matches no heading passes through untouched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from clawkb.retrieve.exact import anchors
from clawkb.retrieve.fusion import Fused
from clawkb.retrieve.term_stats import doc_freqs
from clawkb.text import tokenize

if TYPE_CHECKING:
    from clawkb.retrieve.source import TermCounts
    from clawkb.store.repo import ChunkRow

__all__ = ["DEPTH", "lift", "match"]

#: Candidates whose headings are compared with the query.
DEPTH = 30
#: Reciprocal-rank constant (the fusion default).
RRF_K = 60
FULL = 0.999
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def coverages(
    query: Mapping[str, float], heading: frozenset[str], weight: Mapping[str, float]
) -> tuple[float, float]:
    """How much of the query the heading holds, and how much of the heading the query
    holds (both IDF-weighted; 0, 0 when they share nothing)."""
    if not query or not heading:
        return 0.0, 0.0
    common = sum(w for t, w in query.items() if t in heading)
    if common <= 0:
        return 0.0, 0.0
    return common / sum(query.values()), common / sum(weight.get(t, 1.0) for t in heading)


def _f1(qc: float, hc: float) -> float:
    return 2 * qc * hc / (qc + hc) if qc > 0 and hc > 0 else 0.0


@lru_cache(maxsize=8192)
def _tokens(heading: str) -> frozenset[str]:
    return frozenset(tokenize(heading))


def match(
    queries: Sequence[Mapping[str, float]],
    headings: Sequence[str],
    weight: Mapping[str, float],
    floor: float = 0.0,
) -> float:
    """Best F1 of any query form against any heading whose two coverages both reach
    ``floor`` (0 when no pair shares a word or reaches it)."""
    best = 0.0
    for h in headings:
        toks = _tokens(h)
        for q in queries:
            qc, hc = coverages(q, toks, weight)
            if qc > 0 and min(qc, hc) >= floor:
                best = max(best, _f1(qc, hc))
    return best


def _only_identifiers(text: str) -> bool:
    """True when every word of ``text`` is an identifier-like run (exact.py's anchors)."""
    runs = text.split()
    found = {a.text for a in anchors(text)}
    return bool(runs) and all(r in found or r.rstrip("()") + "()" in found for r in runs)


def headings_of(path: Sequence[str], text: str) -> list[str]:
    """The passage's own heading, and its parent's when the passage starts that section."""
    if not path:
        return []
    out = [path[-1]]
    if len(path) > 1:
        head = text.lstrip()[: len(path[-2]) + 80]
        if path[-2] and path[-2] in head and head.find(path[-2]) < max(1, head.find(path[-1])):
            out.append(path[-2])
    return out


def lift(
    lexical: TermCounts,
    text: str,
    translated: Sequence[str],
    fused: list[Fused],
    rows: Callable[[list[int]], Mapping[int, ChunkRow]],
    floor: float = 0.0,
    covered: Collection[str] | None = None,
) -> tuple[list[Fused], dict[str, Any] | None]:
    """``fused`` with passages whose heading matches the query moved up.

    ``translated`` are the glossary translation tokens of the query (may be
    empty); ``covered`` the query's own tokens that those translations stand for
    (the tokens of the glossary phrases found in it; None: every CJK token).
    Returns the new list and a trace for ``--explain`` (None when no
    candidate's heading matches, and the list is returned as it was).
    """
    if not fused:
        return fused, None
    if _only_identifiers(text):  # a spelling, not a title: exact.py's business
        return fused, None
    own = list(dict.fromkeys(tokenize(text)))
    tr = [t for t in dict.fromkeys(translated) if t not in own]
    if not own and not tr:
        return fused, None
    head = fused[:DEPTH]
    got = rows([f.chunk_id for f in head])
    cand = {f.chunk_id: headings_of(got[f.chunk_id].heading_path, got[f.chunk_id].text)
            for f in head if f.chunk_id in got}  # fmt: skip
    vocab = set(own) | set(tr)
    for hs in cand.values():
        for h in hs:
            vocab.update(_tokens(h))
    terms = sorted(vocab)
    idf = lexical.idf(np.asarray(doc_freqs(lexical, terms), np.int64)).tolist()
    weight = {t: max(float(w), 1e-3) for t, w in zip(terms, idf, strict=True)}
    mine = {t: weight[t] for t in own}
    # the query as written in the other language: the translation plus the words it
    # does not stand for (identifiers, Latin words in a Chinese query, and the words
    # the glossary could not translate, which no heading of the other language holds:
    # "硬件栈保护" translated as "hardware" alone is not the heading "Hardware")
    if covered is None:
        rest = [t for t in own if not _CJK.search(t)]
    else:
        rest = [t for t in own if t not in covered]
    other = {t: weight[t] for t in tr + rest} if tr else {}
    full = {cid: match([mine], hs, weight) >= FULL for cid, hs in cand.items()}
    forms = [mine, other] if other else [mine]
    score = {cid: match(forms, hs, weight, floor) for cid, hs in cand.items()}
    if not any(s > 0 for s in score.values()):
        return fused, None
    by_match = sorted((cid for cid, s in score.items() if s > 0), key=lambda c: -score[c])
    mrank = {cid: r for r, cid in enumerate(by_match, 1)}
    key = {}
    for r, f in enumerate(head, 1):
        m = score.get(f.chunk_id, 0.0)
        key[f.chunk_id] = (
            (1.0 if full.get(f.chunk_id) else 0.0)
            + 1.0 / (RRF_K + r)
            + (1.0 / (RRF_K + mrank[f.chunk_id]) if m > 0 else 0.0)
        )
    # the exact-match stage's tiers stay (a verbatim identifier beats a heading)
    order = sorted(
        head, key=lambda f: (-f.trace.get("exact", {}).get("coverage", 0.0), -key[f.chunk_id])
    )
    # the new order keeps the scores' scale: rank i gets the i-th best score
    scores = sorted((f.score for f in head), reverse=True)
    out = []
    for f, sc in zip(order, scores, strict=True):
        g = Fused(f.chunk_id, sc, dict(f.trace))
        g.trace["headings"] = {"match": round(score.get(f.chunk_id, 0.0), 4),
                               "before": round(f.score, 6)}  # fmt: skip
        out.append(g)
    trace = {"full": sum(full.values()), "matched": len(by_match), "floor": floor}
    return out + fused[DEPTH:], trace
