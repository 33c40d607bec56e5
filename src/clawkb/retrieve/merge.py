"""Section-aware merge: neighbouring chunks of one section become one hit.

Chunking cuts long sections into pieces; when two of them both rank and
their scores are close, showing them apart wastes a slot and hides that the
answer spans both. Merged hits keep the better chunk's anchor id and report
the joint line span and every merged anchor.

:func:`join_text` is the one place consecutive chunk texts are joined: the
text the chunker repeats between neighbours (its overlap) is removed, so a
merged search hit and an ``ask`` passage read the section once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import pairwise

from clawkb.store.repo import ChunkRow
from clawkb.types import Anchor, Hit

_PROBE = 24  # characters of the second text looked up in the first


@dataclass
class Candidate:
    """A ranked chunk; its :class:`Hit` (snippet, highlights) is built only when needed."""

    row: ChunkRow
    score: float
    hit_: Hit | None = None
    make: Callable[..., Hit] | None = field(default=None, repr=False)

    @property
    def hit(self) -> Hit:
        if self.hit_ is None:
            assert self.make is not None, "a candidate needs a hit or a way to make one"
            self.hit_ = self.make()
        return self.hit_

    def final(self, rank: int) -> Hit:
        """The hit at its final rank and score (built once, directly, when not built yet)."""
        if self.hit_ is None and self.make is not None:
            return self.make(rank=rank, score=self.score)
        return replace(self.hit, rank=rank, score=self.score)


def overlap(a: str, b: str) -> int:
    """Length of the longest suffix of ``a`` that is a prefix of ``b``."""
    if not a or not b:
        return 0
    probe = b[: min(_PROBE, len(b))]
    start = max(0, len(a) - len(b))
    i = a.find(probe, start)
    while i >= 0:  # leftmost first: the longest overlap wins
        if b.startswith(a[i:]):
            return len(a) - i
        i = a.find(probe, i + 1)
    for k in range(min(len(probe) - 1, len(a)), 0, -1):  # overlaps shorter than the probe
        if a.endswith(b[:k]):
            return k
    return 0


def join_text(first: str, second: str, *, overlapping: bool) -> str:
    """``first`` then ``second`` (the next chunk); drop what the chunker repeated.

    ``overlapping``: the line spans touch, so the second chunk may begin with
    the end of the first. Otherwise the chunks are separate blocks.
    """
    if not overlapping:
        return first + "\n\n" + second
    cut = overlap(first, second)
    return first + second[cut:] if cut else first + "\n" + second


def join_rows(rows: list[ChunkRow]) -> str:
    """The text of consecutive chunks (sorted by ordinal), read once."""
    text = rows[0].text
    for prev, row in pairwise(rows):
        text = join_text(text, row.text, overlapping=row.line_start <= prev.line_end)
    return text


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
                out[gi] = _join(out[gi], c, before=r.ordinal < lo)
                groups[gi] = (doc, head, min(lo, r.ordinal), max(hi, r.ordinal), best)
                break
        else:
            out.append(c)
            groups.append((r.doc_id, r.heading_path, r.ordinal, r.ordinal, c.score))
    return out


def _join(base: Candidate, other: Candidate, *, before: bool) -> Candidate:
    a, b = base.hit.anchor, other.hit.anchor
    anchor = Anchor(
        id=a.id,
        path=a.path,
        line_start=min(a.line_start, b.line_start),
        line_end=max(a.line_end, b.line_end),
        heading_path=a.heading_path,
        page=a.page,
    )
    if before:  # the other chunk comes first in the file
        text = join_text(other.hit.text, base.hit.text, overlapping=a.line_start <= b.line_end)
    else:
        text = join_text(base.hit.text, other.hit.text, overlapping=b.line_start <= a.line_end)
    exp = dict(base.hit.explanation or {})
    exp["merged"] = [*exp.get("merged", [a.id]), b.id]
    hit = replace(
        base.hit,
        anchor=anchor,
        text=text,
        matched_terms=tuple(dict.fromkeys(base.hit.matched_terms + other.hit.matched_terms)),
        explanation=exp,
    )
    return Candidate(base.row, base.score, hit)
