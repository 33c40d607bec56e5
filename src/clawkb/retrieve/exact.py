"""Exact matches stay on top: a query's identifiers, matched verbatim, outrank everything else.

Engineers search for things that are spelled one way: a register address
(``0x4002_3800``), a config symbol (``CONFIG_ESP_WIFI_ENABLED``), a function
(``esp_wifi_init()``), a type (``ObserverEvent``), a file (``drivers/net/eth.c``),
a command-line flag (``-Wno-dangling-reference``), a quoted error string. A
passage that contains that spelling is what the user asked for; a dense
neighbour that merely talks about something similar is not, however close its
vector. Fused rankings do not know this: reciprocal-rank fusion gives the
dense channel's top result as much credit as the lexical one's, and a dense
model hashes an identifier into sub-word pieces it has never seen together.

The rule, from first principles rather than fitted weights:

* **Anchors** are the query's identifier-like runs (:func:`anchors`): hex
  literals, words joined by ``_``, CamelCase, letters followed by digits
  (``GPIO12``, ``ESP32``), dotted or slashed paths, calls ``name()``, flags
  ``-x``/``--xy``, and the words of a quoted string. Each is matched through the
  index's own tokens (the whole-run token the tokenizer keeps for such runs,
  the canonical form for a hex literal), so "verbatim" means what the index
  means by it, in every language and chunk format.
* **Selective anchors only.** An anchor narrows the answer only if few
  passages contain it: its document frequency must be at most ``√N`` (N the
  number of passages; 70 of 5,000, 316 of 100,000). An identifier that is in a
  large share of the KB (``ESP32`` in an ESP32 manual) is context, not a target.
  Anchors the index does not contain at all are ignored (a typo must not
  empty the results).
* **Coverage decides the tier.** Each passage's anchor coverage is the share of
  the selective anchors' IDF mass it contains; passages are ordered by coverage
  first and by the fused score within one coverage level. A passage that
  contains the rarest anchors comes first, whatever the channels said.
* **A spelling the text broke still counts.** An identifier the index holds
  in no passage as one token may still be in one, broken by how the text was
  made: wrapped at a line end (PDF text, wide tables), a soft hyphen or
  zero-width character inside it, a markup escape (``ESP\\_BT``). For such an
  anchor the passages that hold all its parts are read, and those whose text
  spells the anchor with only such characters in between contain it
  (:func:`spelled_in`); it then counts like any anchor.
* **Nothing is lost to a channel's depth.** The passages that contain the
  anchors are fetched from the lexical index directly (a cheap search on a few
  rare terms) and join the list, so the rule holds in dense mode too and when
  the dense channel filled the candidate list with neighbours.

The stage only reorders when a query has a selective anchor some passage
contains; natural-language questions pass through untouched, which is why
it cannot cost the question-answering sets anything.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np

from clawkb.retrieve.fusion import Fused, lazy
from clawkb.retrieve.term_stats import doc_freqs, holding
from clawkb.text import tokenize
from clawkb.text.normalize import nfkc

if TYPE_CHECKING:
    from clawkb.retrieve.source import RestrictedStats, TermCounts, TermStats
    from clawkb.store.repo import ChunkRow

    #: chunk ids -> their rows (the stage reads the text of a few passages)
    Rows = Callable[[list[int]], Mapping[int, ChunkRow]]

__all__ = [
    "Anchor",
    "anchors",
    "bare",
    "broken",
    "coverage_of",
    "identifier_led",
    "keep_on_top",
    "selective",
    "spelled_in",
]

#: Passages fetched per anchor search (they join the fused list when missing).
FETCH = 20

# A run: what the tokenizer keeps together (no whitespace, CJK, or hard separators).
_RUN = re.compile(
    r"[^\s\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef()\[\]{}<>\"'`,;=|!?*&^$]+"
)
_QUOTED = re.compile(r"\"([^\"]{2,200})\"|`([^`]{2,200})`|“([^”]{2,200})”|「([^」]{2,200})」")
_HEX = re.compile(r"^0x[0-9a-f]+(?:_[0-9a-f]+)*$", re.I)
_SNAKE = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]|^_+[A-Za-z]")
_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z]{2,}[a-z]{2}")
_ALNUM = re.compile(r"^[A-Za-z]{2,}[0-9]+[A-Za-z0-9]*$|^[A-Za-z][0-9]+[A-Za-z][A-Za-z0-9]*$")
_PATH = re.compile(r"[A-Za-z0-9][/\\][A-Za-z0-9]|[A-Za-z_]{2,}\.[A-Za-z_]{1,}[A-Za-z0-9_]*$")
# a command-line flag: ``--long-name``, or ``-x`` with a capital, digit or inner dash
# (``-Wall``, ``-O2``, ``-Wno-dangling-reference``); ``-dash`` alone is a word
_FLAG = re.compile(
    r"^--[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*$"
    r"|^-(?=[A-Za-z0-9_-]*[A-Z0-9-])[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*$"
)
_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_.:]*)\(\)")
# what text production puts inside a spelling: a line break and its indent, a soft
# hyphen, zero-width characters, a markup escape; at most a few of them
_GAP = r"[\s\u00ad\u200b-\u200d\u2060\\]{0,6}"
_PART = re.compile(r"[^\W_]+")
_STRIP = ".,:;!?/\\"


@dataclass(frozen=True)
class Anchor:
    """One thing the query spells exactly: every token must be in a passage."""

    text: str
    tokens: tuple[str, ...]


def _kind(run: str) -> str | None:
    if _HEX.match(run):
        return "hex"
    if _FLAG.match(run):
        return "flag"
    core = run.strip(_STRIP)
    if len(core) < 3:
        return None
    if _SNAKE.search(core):
        return "snake"
    if _CAMEL.search(core):
        return "camel"
    if _ALNUM.match(core):
        return "alnum"
    if _PATH.search(core):
        return "path"
    return None


def _whole(run: str, kind: str) -> tuple[str, ...]:
    """The index token that stands for ``run`` verbatim."""
    toks = tokenize(run)
    if not toks:
        return ()
    if kind == "hex":  # the canonical form both spellings (with and without _) produce
        canon = [t for t in toks if re.fullmatch(r"0x[0-9a-f]+", t)]
        return (canon[0],) if canon else (toks[0],)
    return (toks[0],)


def anchors(query: str) -> list[Anchor]:
    """The query's identifier-like runs and quoted strings, as index tokens."""
    return list(_anchors(query))


@functools.lru_cache(maxsize=256)
def _anchors(query: str) -> tuple[Anchor, ...]:
    """:func:`anchors`, kept for the last queries: one search reads a query's anchors
    in five places (the exact stage, the adaptive weights twice, headings, ``bare``)."""
    text = nfkc(query)
    out: dict[tuple[str, ...], Anchor] = {}
    for m in _QUOTED.finditer(text):
        inner = next(g for g in m.groups() if g)
        toks = tuple(
            dict.fromkeys(_whole(r, "word")[0] for r in _RUN.findall(inner) if tokenize(r))
        )
        if toks:
            out.setdefault(toks, Anchor(inner, toks))
    for m in _CALL.finditer(text):
        toks = _whole(m.group(1), "call")
        if toks:
            out.setdefault(toks, Anchor(m.group(0), toks))
    for run in _RUN.findall(text):
        kind = _kind(run)
        if kind is None:
            continue
        toks = _whole(run, kind)
        if toks:
            out.setdefault(toks, Anchor(run, toks))
    return tuple(out.values())


def bare(query: str) -> bool:
    """True when the query spells identifiers and nothing else (``esp_wifi_init``,
    ``0x4002_3800 GPIOB_PUPDR``): no word is left once its anchors are taken out."""
    found = anchors(query)
    return bool(found) and not _around(query, found)


def _around(query: str, found: Sequence[Anchor]) -> list[str]:
    """The query's tokens outside its anchors (``found``), each once."""
    rest = nfkc(query)
    for a in sorted(found, key=lambda a: -len(a.text)):
        rest = rest.replace(a.text, " ")
    spelled = {t for a in found for t in a.tokens}
    return [t for t in dict.fromkeys(tokenize(rest)) if t not in spelled]


def identifier_led(lexical: TermCounts, query: str) -> bool:
    """True when the query's identifiers carry at least half of its IDF mass: a
    bare identifier (:func:`bare`), or one wrapped in words most passages hold
    (``BLE_GAP_ADV_ITVL_MS 是做什么用的？``, ``where is CONFIG_SMP set``). Such a
    query asks about the spelling; the words around it say little the KB does
    not say everywhere. Words no passage holds count for nothing."""
    found = anchors(query)
    if not found:
        return False
    spelled = list(dict.fromkeys(t for a in found for t in a.tokens))
    around = _around(query, found)
    if not around:
        return True
    df = doc_freqs(lexical, spelled + around)
    idf = lexical.idf(df)
    # a word no passage holds (a question in the other language) says nothing here
    near = float((idf[len(spelled) :] * (df[len(spelled) :] > 0)).sum())
    return float(idf[: len(spelled)].sum()) >= near


def selective(lexical: TermCounts, found: Sequence[Anchor]) -> list[tuple[Anchor, float]]:
    """(anchor, IDF weight) for the anchors some passage has and at most √N passages have.

    A multi-token anchor (a quoted string) counts by its rarest token.
    """
    if not found:
        return []
    n = max(1, int(lexical.n_docs))
    limit = max(3.0, math.sqrt(n))
    terms = [t for a in found for t in a.tokens]
    df = dict(zip(terms, doc_freqs(lexical, terms).tolist(), strict=True))
    out = []
    for a in found:
        dfs = [df[t] for t in a.tokens]
        if min(dfs) == 0 or min(dfs) > limit:
            continue
        idf = float(lexical.idf(np.asarray([min(dfs)], np.int64))[0])
        out.append((a, idf))
    return out


def _spelling(a: Anchor) -> str:
    text = a.text[:-2] if a.text.endswith("()") else a.text
    return text.strip(_STRIP)


@functools.lru_cache(maxsize=256)
def _broken_re(spelling: str) -> re.Pattern[str]:
    body = _GAP.join(re.escape(c) for c in spelling)
    return re.compile(rf"(?<!\w){body}(?!\w)", re.I)


def spelled_in(a: Anchor, text: str) -> bool:
    """True when ``text`` spells anchor ``a``, perhaps broken by a line break and its
    indent, a soft hyphen, a zero-width character or a markup escape
    (``ESP_BT_VS_\\n  PCA_OCF``, ``ESP\\_BT``); never inside a longer name."""
    return _broken_re(_spelling(a)).search(nfkc(text)) is not None


def broken(
    lexical: RestrictedStats,
    found: Sequence[Anchor],
    rows: Rows,
    allowed: np.ndarray | None = None,
) -> dict[Anchor, set[int]]:
    """Per anchor the index holds in no passage as one token, the ids of the passages
    whose text spells it broken (:func:`spelled_in`), when at most √N do.

    The candidates are the passages that best match the anchor's parts (one
    lexical search on them; every part must be in the index); only their text is read.
    """
    single = [a for a in found if len(a.tokens) == 1 and not a.text.startswith(("-", "0x"))]
    if not single:
        return {}
    whole = doc_freqs(lexical, [a.tokens[0] for a in single]).tolist()
    limit = max(3.0, math.sqrt(max(1, int(lexical.n_docs))))
    out: dict[Anchor, set[int]] = {}
    for a, df in zip(single, whole, strict=True):
        parts = [t for t in dict.fromkeys(tokenize(_spelling(a))) if t != a.tokens[0]]
        if df or len(parts) < 2 or not doc_freqs(lexical, parts).all():
            continue
        ids, scores, _ = lexical.search(parts, k=FETCH, allowed=allowed)
        cand = [int(i) for i, sc in zip(ids.tolist(), scores.tolist(), strict=True) if sc > 0]
        texts = rows(cand)
        got = {i for i in cand if i in texts and spelled_in(a, texts[i].text)}
        if got and len(got) <= limit:
            out[a] = got
    return out


def restricted(lexical: TermStats) -> TypeGuard[RestrictedStats]:
    """True when ``lexical`` can search within given chunk ids (the local index can;
    a remote source's term statistics may not, and then these stages stand aside)."""
    return hasattr(lexical, "segments")


def _containing(lexical: RestrictedStats, a: Anchor, ids: np.ndarray) -> set[int]:
    """The ids among ``ids`` whose passage contains every token of ``a``."""
    keep: set[int] | None = None
    for t in a.tokens:
        have = holding(lexical, t, ids)  # the token's postings, not a restricted search
        if have is None:
            got, scores, _ = lexical.search([t], k=len(ids), allowed=ids)
            have = {int(i) for i, s in zip(got.tolist(), scores.tolist(), strict=True) if s > 0}
        keep = have if keep is None else keep & have
    return keep or set()


def coverage_of(
    lexical: RestrictedStats,
    weighted: Sequence[tuple[Anchor, float]],
    ids: np.ndarray,
    known: Mapping[Anchor, set[int]] | None = None,
) -> dict[int, float]:
    """Per chunk id, the share of the anchors' IDF mass its passage contains.

    ``known``: anchors whose passages were found by reading them (:func:`broken`).
    """
    ids = np.unique(ids)
    total = sum(w for _, w in weighted) or 1.0
    cover = dict.fromkeys(ids.tolist(), 0.0)
    for a, w in weighted:
        have = known[a] & set(cover) if known and a in known else _containing(lexical, a, ids)
        for cid in have:
            cover[cid] += w / total
    return cover


def _fetched_all(
    lexical: TermCounts,
    weighted: Sequence[tuple[Anchor, float]],
    tokens: Sequence[str],
    ids: np.ndarray,
    scores: np.ndarray,
    allowed: np.ndarray | None,
) -> dict[Anchor, set[int]] | None:
    """The common case -- one anchor of one token, searched in the whole index -- when
    the fetch search already returned every passage that holds it (no more passages
    hold the token than it asked for): those passages, so that :func:`coverage_of`
    need not search for them again. None otherwise."""
    if allowed is not None or len(weighted) != 1 or len(tokens) != 1:
        return None
    if int(doc_freqs(lexical, tokens)[0]) > FETCH:
        return None
    return {
        weighted[0][0]: {
            int(i) for i, s in zip(ids.tolist(), scores.tolist(), strict=True) if s > 0
        }
    }


@dataclass(frozen=True)
class Spelled:
    """What :func:`keep_on_top` reads from the query and the index alone (its selective
    anchors and the passages that spell them), before the fused list is known: a
    search computes it while its query is being embedded (:func:`prepare`)."""

    query: str
    allowed: np.ndarray | None
    weighted: list[tuple[Anchor, float]]
    known: dict[Anchor, set[int]]
    tokens: list[str]
    ids: np.ndarray
    spelled: np.ndarray


def prepare(
    lexical: RestrictedStats,
    query: str,
    allowed: np.ndarray | None = None,
    rows: Rows | None = None,
) -> Spelled:
    """The query's selective anchors (a broken spelling counts when ``rows`` reads
    passages) and the passages found for them, for :func:`keep_on_top`."""
    found = anchors(query)
    weighted = selective(lexical, found)
    known = broken(lexical, found, rows, allowed) if rows is not None else {}
    for a, got in known.items():
        weighted.append((a, float(lexical.idf(np.asarray([len(got)], np.int64))[0])))
    tokens = [t for a, _ in weighted if a not in known for t in a.tokens]
    ids, spelled, _ = (
        lexical.search(tokens, k=FETCH * len(weighted), allowed=allowed)
        if tokens
        else (np.zeros(0, np.int64), np.zeros(0, np.float32), None)
    )
    if known:  # the passages read for a broken spelling join like fetched ones
        more = sorted({i for got in known.values() for i in got} - set(ids.tolist()))
        ids = np.concatenate([ids, np.asarray(more, np.int64)])
        spelled = np.concatenate([spelled, np.zeros(len(more), spelled.dtype)])
    return Spelled(query, allowed, weighted, known, tokens, ids, spelled)


def keep_on_top(
    lexical: TermStats,
    query: str,
    fused: list[Fused],
    allowed: np.ndarray | None = None,
    hidden: np.ndarray | None = None,
    rows: Rows | None = None,
    prepared: Spelled | None = None,
) -> tuple[list[Fused], dict[str, Any] | None]:
    """``fused`` with passages that contain the query's selective anchors first.

    ``rows`` reads passages: with it, an anchor the text broke (:func:`broken`) counts.
    ``prepared``: :func:`prepare` of the same query, scope and ``rows``, when done already.
    Returns the new list and a trace for ``--explain`` (None when the query has
    no selective anchor, and the list is returned as it was).
    """
    if not restricted(lexical):
        return fused, None
    sp = prepared
    if sp is None or sp.query != query or sp.allowed is not allowed:
        sp = prepare(lexical, query, allowed, rows)
    weighted, known, tokens, ids, spelled = sp.weighted, sp.known, sp.tokens, sp.ids, sp.spelled
    if not weighted:
        return fused, None
    # a query that is nothing but identifiers has no meaning beyond its spelling for
    # the dense channel to judge: within a coverage level, the anchors' own BM25F
    # (how much a passage is about that spelling: its title, its heading, its count)
    # orders the passages, not the fused score
    by_spelling = dict(zip(ids.tolist(), spelled.tolist(), strict=True)) if bare(query) else {}
    have = {f.chunk_id for f in fused}
    hide = set(hidden.tolist()) if hidden is not None and len(hidden) else set()
    extra = [int(i) for i in ids.tolist() if int(i) not in have and int(i) not in hide]
    pool = fused + [Fused(i, 0.0, {"exact": {"fetched": True}}) for i in extra]
    pool_ids = np.asarray([f.chunk_id for f in pool], np.int64)
    holders = known or _fetched_all(lexical, weighted, tokens, ids, spelled, allowed)
    cover = coverage_of(lexical, weighted, pool_ids, holders)
    lo = min((f.score for f in pool), default=0.0)
    hi = max((f.score for f in pool), default=0.0)
    span = (hi - lo) + 1e-6
    level = {cid: round(c, 6) for cid, c in cover.items()}  # rounded once per passage
    order = sorted(
        range(len(pool)),
        key=lambda i: (-level[pool[i].chunk_id], -by_spelling.get(pool[i].chunk_id, 0.0), i),
    )
    rank = {c: n for n, c in enumerate(sorted(set(level.values())))}
    table = _Covered(pool, level)
    # the lowest level keeps its scores; each level above is lifted past the one below
    out = [lazy(pool[i].chunk_id, pool[i].score + rank[level[pool[i].chunk_id]] * span, table, i)
           for i in order]  # fmt: skip
    trace = {
        "anchors": [a.text for a, _ in weighted],
        **({"broken": [a.text for a in known]} if known else {}),
        "fetched": len(extra),
        "on_top": sum(1 for f in pool if level[f.chunk_id] > 0),
    }
    return out, trace


class _Covered:
    """The traces of :func:`keep_on_top`'s list, built when read: each passage's
    fused trace with its anchor coverage added under ``exact``."""

    __slots__ = ("level", "pool")

    def __init__(self, pool: list[Fused], level: dict[int, float]) -> None:
        self.pool, self.level = pool, level

    def trace(self, row: int) -> dict[str, Any]:
        f = self.pool[row]
        t = dict(f.trace)
        t["exact"] = {**t.get("exact", {}), "coverage": self.level[f.chunk_id]}
        return t
