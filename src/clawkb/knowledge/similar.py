"""Near-duplicate text: token-set Jaccard over word shingles, bilingual.

Latin words are one token each; CJK text becomes character bigrams, so a
Chinese sentence reworded slightly still shares most of its shingles.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_LATIN = re.compile(r"[0-9a-z_]+")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")


def shingles(text: str) -> frozenset[str]:
    t = text.casefold()
    out = set(_LATIN.findall(t))
    for run in _CJK.findall(t):
        out.update(run[i : i + 2] for i in range(max(1, len(run) - 1)))
    return frozenset(out)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def most_similar(text: str, candidates: Iterable[tuple[str, str]]) -> tuple[str | None, float]:
    """(key, similarity) of the candidate (key, text) closest to ``text``."""
    mine = shingles(text)
    best: tuple[str | None, float] = (None, 0.0)
    for key, other in candidates:
        score = jaccard(mine, shingles(other))
        if score > best[1]:
            best = (key, score)
    return best


def duplicate_pairs(
    items: Sequence[tuple[str, str]], threshold: float, min_shingles: int = 8
) -> list[tuple[str, str, float]]:
    """Pairs of (key, key, similarity) at or above ``threshold``; short texts are left out.

    Candidates come from an inverted index over shingles, so only items that
    share rare shingles are compared (not every pair).
    """
    sets = [(k, shingles(t)) for k, t in items]
    sets = [(k, s) for k, s in sets if len(s) >= min_shingles]
    postings: dict[str, list[int]] = {}
    for i, (_, s) in enumerate(sets):
        for sh in s:
            postings.setdefault(sh, []).append(i)
    limit = max(50, len(sets) // 20)  # shingles in many items say little about duplication
    out = []
    for i, (key, s) in enumerate(sets):
        candidates: set[int] = set()
        for sh in s:
            post = postings[sh]
            if len(post) <= limit:
                candidates.update(j for j in post if j > i)
        for j in candidates:
            score = jaccard(s, sets[j][1])
            if score >= threshold:
                out.append((key, sets[j][0], round(score, 3)))
    return sorted(out, key=lambda p: -p[2])
