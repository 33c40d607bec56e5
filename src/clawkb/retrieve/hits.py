"""Hits: building one from a stored chunk, and the one JSON form of a hit.

:func:`make_hit` is the only place a :class:`~clawkb.types.Hit` is made from a
store row (snippet, highlights, matched terms); :func:`hit_dict` and
:func:`anchor_dict` are the only places a hit or an anchor becomes JSON, so
the CLI, MCP and HTTP outputs cannot drift apart (schema in docs/json.md).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from clawkb.ingest.chunker import started_sections
from clawkb.memo import bytes_lru, str_bytes
from clawkb.retrieve.snippet import Prepared, prepare, window
from clawkb.store.repo import ChunkRow
from clawkb.text import normalize
from clawkb.text.injection import flag_injection
from clawkb.text.records import table_records
from clawkb.types import Anchor, Hit


def _view_bytes(args: tuple[Any, ...], view: Prepared) -> int:
    anchor, text = args
    back = 36 * len(view.back) if view.back else 0  # a list of ints, 8 + 28 bytes each
    return (
        200
        + str_bytes(anchor)
        + str_bytes(text)
        + str_bytes(view.flat)
        + str_bytes(view.norm)
        + back
    )


@bytes_lru(8 << 20, _view_bytes)
def _view(anchor: str, text: str) -> Prepared:
    """A chunk's prepared text (display text, normalised form, offset map), kept by anchor.

    An anchor id is derived from the chunk's content, so an entry never goes
    stale; normalising a long CJK chunk is the largest cost of building a
    hit, and a long-running process (server, MCP, `clawkb eval`) meets the
    same chunks often. Bounded by bytes (8 MB), not entries: a CJK chunk's
    offset map is many times its text, and a server that keeps meeting new
    chunks would otherwise grow until the N-th one.
    """
    return prepare(text)


@lru_cache(maxsize=16384)
def _head(title: str, heading_path: tuple[str, ...]) -> str:
    return normalize(" ".join((title, *heading_path)))


#: Up to this many non-ASCII or one-character terms a substring test each is cheapest.
_FEW_TERMS = 8


@lru_cache(maxsize=256)
def _split_terms(terms: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...], tuple[str, ...]]:
    """A query's single characters (as a set), its longer ASCII terms and the other longer ones."""
    longer = [t for t in terms if len(t) > 1]
    return (
        frozenset(t for t in terms if len(t) == 1),
        tuple(t for t in longer if t.isascii()),
        tuple(t for t in longer if not t.isascii()),
    )


def _matched(terms: tuple[str, ...], view: Prepared, row: ChunkRow) -> tuple[str, ...]:
    """The terms found in the chunk's normalised text or its title and heading path."""
    body = view.norm
    single, _, other = _split_terms(terms)
    if len(single) + len(other) <= _FEW_TERMS:  # a substring test each is cheapest
        missing = [t for t in terms if t not in body]
    else:  # Chinese questions (every character and pair): characters as a set first
        chars = view.chars
        missing = [
            t
            for t in terms
            if (t not in chars if len(t) == 1 else not chars.issuperset(t) or t not in body)
        ]
    if not missing:  # the usual case: the heading is not needed
        return terms
    head = _head(row.title, row.heading_path)
    absent = {t for t in missing if t not in head}
    return tuple(t for t in terms if t not in absent) if absent else terms


@lru_cache(maxsize=4096)
def _title_terms(title: str) -> str:
    return normalize(title)


def section_path(
    text: str, heading_path: tuple[str, ...], terms: tuple[str, ...]
) -> tuple[str, ...]:
    """The heading path of the section a match belongs to, for a chunk that starts several.

    A glued chunk (:func:`~clawkb.ingest.chunker.started_sections`) is reported
    under a parent heading it starts when that heading holds at least half of
    the query's terms and more of them than the deeper ones (the shorter
    heading on a tie, as the closer match); otherwise under its own path:
    searching "GATT Related Instructions" finds the chunk that starts that
    section and its first subsection, and names the section searched for.
    """
    k = started_sections(text, heading_path)
    if k < 2 or not terms:
        return heading_path
    n = len(heading_path)

    def key(depth: int) -> tuple[int, int]:
        # more of the query's terms first, then the shorter (closer) heading
        title = _title_terms(heading_path[depth - 1])
        return sum(1 for t in terms if t in title), -len(title)

    best, best_key = n, key(n)
    for depth in range(n - 1, n - k, -1):
        found_key = key(depth)
        # a parent is named only when it holds at least half of the query
        if 2 * found_key[0] >= len(terms) and found_key > best_key:
            best, best_key = depth, found_key
    return heading_path[:best]


def make_hit(
    row: ChunkRow,
    rank: int,
    score: float,
    tokens: list[str],
    explanation: dict[str, Any] | None = None,
    *,
    snippet: bool = True,
    terms: tuple[str, ...] | None = None,
) -> Hit:
    """A Hit for a stored chunk: anchor, snippet, highlights and matched terms.

    Matched terms use a substring test on the normalised text: cheap, and exact
    for every token the tokenizer cuts out of the text verbatim (joined forms
    like 0x40013000 are the rare exception; --explain gives the exact view).

    ``snippet=False`` is the ranking-only hit (evaluation): no snippet or
    highlights, and matched terms only where the result needs them — the top
    hit (rank 1, the result's confidence) and hits built before their rank is
    known (rank 0: rerank and section merge) — so a deep ranking never
    normalises chunk texts it will not show. ``terms``: ``tokens`` without
    repeats, in order (:func:`query_terms`), when the caller has them already.
    """
    matched: tuple[str, ...] = ()
    snip, spans = "", ()  # type: tuple[str, tuple[tuple[int, int], ...]]
    anchor = row.to_anchor()
    uniq: tuple[str, ...] | None = terms
    if started_sections(row.text, row.heading_path) > 1:
        uniq = uniq if uniq is not None else query_terms(tokens)
        path = section_path(row.text, row.heading_path, uniq)
        if path != row.heading_path:
            anchor = Anchor(
                anchor.id, anchor.path, anchor.line_start, anchor.line_end, path, anchor.page
            )
    if snippet or rank <= 1:
        uniq = uniq if uniq is not None else query_terms(tokens)
        view = _view(row.anchor, row.text)
        matched = _matched(uniq, view, row)
        if snippet:
            snip, spans = window(view, uniq)
    # positional, in Hit's field order (rank, score, anchor, text, title, kind,
    # matched_terms, snippet, highlights, explanation, trust, domain): cheaper than keywords
    return Hit(
        rank,
        float(score),
        anchor,
        row.text,
        row.title,
        row.kind,
        matched,
        snip,
        spans,
        explanation,
        row.trust,
        row.domain,
    )


def query_terms(tokens: list[str]) -> tuple[str, ...]:
    """The query's distinct tokens in order: what hits are matched and highlighted with."""
    return tuple(dict.fromkeys(tokens))


def anchor_dict(a: Anchor) -> dict[str, Any]:
    """Where a chunk lives, as JSON: the same keys in every output."""
    return {
        "anchor": a.id,
        "path": a.path,
        "line_start": a.line_start,
        "line_end": a.line_end,
        "page": a.page,
        "heading_path": list(a.heading_path),
        "location": a.location,
    }


def hit_dict(hit: Hit, *, text: bool = True) -> dict[str, Any]:
    """The one JSON hit (docs/json.md). ``text=False`` leaves the full chunk text out."""
    out: dict[str, Any] = {
        "rank": hit.rank,
        "score": round(hit.score, 6),
        **anchor_dict(hit.anchor),
        "title": hit.title,
        "kind": hit.kind,
        "matched_terms": list(hit.matched_terms),
        "snippet": hit.snippet,
        "highlights": [list(h) for h in hit.highlights],
        "injection_flags": flag_injection(hit.text),
        "trust": hit.trust,  # trust tier of the source (clawkb.knowledge)
        "domain": hit.domain,
        "records": _records(hit.text),  # rows of its pipe tables, header -> value
    }
    if text:
        out["text"] = hit.text
    if hit.explanation is not None:
        out["explanation"] = hit.explanation
    return out


def _records(text: str) -> list[dict[str, str]]:
    if "|" not in text:
        return []
    return table_records(text)
