"""Assemble the context an answer is built from, within a token budget.

Hits arrive best first. Hits that are neighbouring chunks of the same section
(same document, same heading path and page, consecutive ordinals) are merged
into one passage, with the overlap the chunker repeats between pieces removed,
so the model reads a section once instead of three overlapping fragments.
Passages are then taken best first while they fit ``budget_tokens``
(estimated with the chunker's model-free :func:`estimate_tokens`) and numbered
``[1]..[n]``; those numbers are what answers cite.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from clawkb.retrieve.merge import join_rows
from clawkb.store.repo import ChunkRow, Repository
from clawkb.text.estimate import estimate_tokens
from clawkb.text.injection import flag_injection
from clawkb.types import Anchor, Hit

__all__ = ["Passage", "build_context"]


@dataclass(frozen=True)
class Passage:
    """One numbered passage of the context: merged chunk text plus its anchor.

    ``anchor`` spans all merged chunks (first line of the first, last line of
    the last) and carries the id of the best-scoring one; ``anchors`` lists
    every merged chunk id so each can be opened with ``clawkb show``.
    """

    n: int
    anchor: Anchor
    anchors: tuple[str, ...]
    text: str
    score: float
    rank: int
    title: str = ""
    tokens: int = 0
    flags: tuple[str, ...] = ()
    truncated: bool = False

    @property
    def section(self) -> str:
        return " > ".join(self.anchor.heading_path)

    @property
    def source(self) -> str:
        return self.anchor.location

    def to_dict(self) -> dict[str, Any]:
        a = self.anchor
        return {
            "n": self.n,
            "anchor": a.id,
            "anchors": list(self.anchors),
            "path": a.path,
            "line_start": a.line_start,
            "line_end": a.line_end,
            "page": a.page,
            "heading_path": list(a.heading_path),
            "title": self.title,
            "score": round(self.score, 6),
            "rank": self.rank,
            "tokens": self.tokens,
            "truncated": self.truncated,
            "injection_flags": list(self.flags),
            "text": self.text,
        }


@dataclass
class _Group:
    rows: list[ChunkRow]
    best: Hit
    ranks: list[int] = field(default_factory=list)

    def key(self) -> tuple[int, tuple[str, ...], int | None]:
        r = self.rows[0]
        return (r.doc_id, r.heading_path, r.page)


def build_context(
    repo: Repository,
    hits: Sequence[Hit],
    *,
    budget_tokens: int = 1800,
    max_passages: int = 8,
) -> list[Passage]:
    """Merge neighbouring hits of one section, then fill the budget best first.

    The best passage is always included (cut to the budget if it alone is too
    long) so a tiny budget still yields a cited answer; later passages that do
    not fit are skipped, and a shorter one further down may still fit.
    """
    groups = _merge(repo, hits)
    out: list[Passage] = []
    left = budget_tokens
    for g in groups:
        if len(out) >= max_passages:
            break
        text = join_rows(g.rows)
        tokens = estimate_tokens(text)
        truncated = False
        if tokens > left:
            if out:
                continue
            text, tokens, truncated = _truncate(text, left), min(tokens, left), True
        left -= tokens
        out.append(_passage(len(out) + 1, g, text, tokens, truncated))
    return out


def _merge(repo: Repository, hits: Sequence[Hit]) -> list[_Group]:
    """Group hits into runs of consecutive chunks of one section, best run first."""
    by_anchor = repo.chunks_by_anchors([h.anchor.id for h in hits])
    rows = [by_anchor.get(h.anchor.id) for h in hits]
    groups: list[_Group] = []
    for hit, row in zip(hits, rows, strict=True):
        if row is None:  # deleted since the search ran
            continue
        for g in groups:
            if g.key() == (row.doc_id, row.heading_path, row.page) and _adjacent(g.rows, row):
                g.rows.append(row)
                g.rows.sort(key=lambda r: r.ordinal)
                g.ranks.append(hit.rank)
                break
        else:
            groups.append(_Group([row], hit, [hit.rank]))
    # a hit may have bridged two earlier groups: merge until stable
    merged: list[_Group] = []
    for g in groups:
        for m in merged:
            if m.key() == g.key() and any(_adjacent(m.rows, r) for r in g.rows):
                m.rows = sorted(
                    {r.id: r for r in (*m.rows, *g.rows)}.values(), key=lambda r: r.ordinal
                )
                m.ranks += g.ranks
                break
        else:
            merged.append(g)
    return merged


def _adjacent(rows: list[ChunkRow], row: ChunkRow) -> bool:
    return any(abs(r.ordinal - row.ordinal) <= 1 for r in rows)


def _truncate(text: str, budget: int) -> str:
    """Cut ``text`` at a line or sentence end so it fits ``budget`` tokens."""
    lo, hi = 0, len(text)
    while lo < hi:  # longest prefix within budget (estimate is monotone enough)
        mid = (lo + hi + 1) // 2
        if estimate_tokens(text[:mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    cut = text[:lo]
    for sep in ("\n", "。", ". ", "；", "; "):
        pos = cut.rfind(sep)
        if pos > lo // 2:
            return cut[: pos + len(sep)].rstrip()
    return cut


def _passage(n: int, g: _Group, text: str, tokens: int, truncated: bool) -> Passage:
    first, last = g.rows[0], g.rows[-1]
    anchor = replace(g.best.anchor, line_start=first.line_start, line_end=last.line_end)
    return Passage(
        n=n,
        anchor=anchor,
        anchors=tuple(r.anchor for r in g.rows),
        text=text,
        score=g.best.score,
        rank=min(g.ranks),
        title=g.best.title,
        tokens=tokens,
        flags=tuple(flag_injection(text)),
        truncated=truncated,
    )
