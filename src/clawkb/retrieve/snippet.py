"""Pick the part of a chunk worth showing and where the query terms are in it."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


@lru_cache(maxsize=256)
def _patterns(terms: tuple[str, ...]) -> re.Pattern[str] | None:
    """One regex for the terms worth highlighting (longest first).

    Single CJK characters are only highlighted when no longer term is given,
    and single Latin letters/digits never: they would light up everything.
    """
    keep = [t for t in terms if len(t) > 1 or (_CJK.match(t) and len(terms) <= 2)]
    if not keep:
        return None
    keep = sorted(set(keep), key=len, reverse=True)
    return re.compile("|".join(re.escape(t) for t in keep), re.IGNORECASE)


def make_snippet(
    text: str, terms: Sequence[str], width: int = 240
) -> tuple[str, tuple[tuple[int, int], ...]]:
    """Return a window of ``text`` around the densest matches, and match spans."""
    flat = " ".join(unicodedata.normalize("NFKC", text).split())
    pat = _patterns(tuple(terms))
    if pat is None:
        return _cut(flat, 0, width), ()
    spans = [m.span() for m in pat.finditer(flat) if _at_boundaries(flat, *m.span())]
    if not spans:
        return _cut(flat, 0, width), ()
    best_start, best_count = 0, -1
    for i, (s, _) in enumerate(spans):
        count = sum(1 for s2, _ in spans[i:] if s2 < s + width)
        if count > best_count:
            best_start, best_count = s, count
    start = max(0, best_start - width // 4)
    if start > 0:
        space = flat.rfind(" ", 0, start + 1)
        start = space + 1 if space >= 0 and start - space < 20 else start
    snippet = _cut(flat, start, width)
    prefix = 1 if start > 0 else 0
    out = []
    for s, e in spans:
        if s >= start and e <= start + width:
            out.append((s - start + prefix, e - start + prefix))
    return snippet, tuple(out)


def _boundary(text: str, i: int) -> bool:
    """Could a token start or end at ``i``? (What the tokenizer splits on.)"""
    if i <= 0 or i >= len(text):
        return True
    a, b = text[i - 1], text[i]
    if not (a.isalnum() and b.isalnum()) or _CJK.match(a) or _CJK.match(b):
        return True
    if a.isdigit() != b.isdigit():
        return True  # STM32|F401
    return a.islower() and b.isupper()  # Write|Pin


def _at_boundaries(text: str, start: int, end: int) -> bool:
    """Highlight whole tokens and identifier parts, not letters inside words."""
    return _boundary(text, start) and _boundary(text, end)


def _cut(text: str, start: int, width: int) -> str:
    piece = text[start : start + width]
    return ("…" if start > 0 else "") + piece + ("…" if start + width < len(text) else "")


def highlight(snippet: str, spans: Sequence[tuple[int, int]], before: str, after: str) -> str:
    out, pos = [], 0
    for s, e in spans:
        if s < pos:
            continue
        out += [snippet[pos:s], before, snippet[s:e], after]
        pos = e
    out.append(snippet[pos:])
    return "".join(out)
