"""Section-aware merge: neighbouring chunks of one section become one hit.

Chunking cuts long sections into pieces; when two of them both rank and
their scores are close, showing them apart wastes a slot and hides that the
answer spans both. Merged hits keep the better chunk's anchor id and report
the joint line span and every merged anchor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from clawkb.store.repo import ChunkRow
from clawkb.types import Anchor, Hit


@dataclass
class Candidate:
    """A ranked chunk; its :class:`Hit` (snippet, highlights) is built only when needed."""

    row: ChunkRow
    score: float
    hit_: Hit | None = None
    make: Callable[[], Hit] | None = field(default=None, repr=False)

    @property
    def hit(self) -> Hit:
        if self.hit_ is None:
            assert self.make is not None, "a candidate needs a hit or a way to make one"
            self.hit_ = self.make()
        return self.hit_


def merge_adjacent(cands: list[Candidate], ratio: float = 0.8) -> list[Candidate]:
    """Fold a candidate into an earlier (better) one of the same section when adjacent.

    Adjacent: same document and heading path, ordinals next to each other (the
    group grows in both directions). Close: score >= ``ratio`` x the group's best.
    """
    out: list[Candidate] = []
    groups: list[tuple[int, tuple[str, ...], int, int, float]] = []  # doc, heading, lo, hi, best
    for c in cands:
        r = c.row
        for gi, (doc, head, lo, hi, best) in enumerate(groups):
            if doc != r.doc_id or head != r.heading_path:
                continue
            if r.ordinal in (lo - 1, hi + 1) and c.score >= ratio * best:
                out[gi] = _join(out[gi], c)
                groups[gi] = (doc, head, min(lo, r.ordinal), max(hi, r.ordinal), best)
                break
        else:
            out.append(c)
            groups.append((r.doc_id, r.heading_path, r.ordinal, r.ordinal, c.score))
    return out


def _join(base: Candidate, other: Candidate) -> Candidate:
    a, b = base.hit.anchor, other.hit.anchor
    first, second = (base, other) if base.row.ordinal < other.row.ordinal else (other, base)
    anchor = Anchor(
        id=a.id,
        path=a.path,
        line_start=min(a.line_start, b.line_start),
        line_end=max(a.line_end, b.line_end),
        heading_path=a.heading_path,
        page=a.page,
    )
    exp = dict(base.hit.explanation or {})
    exp["merged"] = [*exp.get("merged", [a.id]), b.id]
    hit = replace(
        base.hit,
        anchor=anchor,
        text=first.hit.text + "\n" + second.hit.text,
        matched_terms=tuple(dict.fromkeys(base.hit.matched_terms + other.hit.matched_terms)),
        explanation=exp,
    )
    return Candidate(base.row, base.score, hit)
