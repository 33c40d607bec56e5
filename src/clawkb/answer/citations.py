"""Check an answer's ``[n]`` citations against the passages it was given.

A model may cite ``[7]`` when the context had five passages, or invent a
citation style. Every ``[n]`` (also ``[1, 2]``, ``[1][2]`` and full-width
``【1】``) that does not name a passage in the context is removed from the
text and reported, so each citation a user sees is traceable to a source.
Removal takes the words that only joined it with it: "see [7] and [2]"
becomes "see [2]", and a sentence left with nothing but "Also see" goes.

Sources are then numbered in the order a reader meets them: the passages
the answer cites, in order of first citation, are [1], [2], ...; the rest
follow. :class:`CitationStream` applies the same numbering to a streamed
answer as it arrives, so what was streamed is what is listed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

__all__ = ["CitationCheck", "CitationStream", "check_citations", "reading_order", "renumber"]

_CITE = re.compile(r"[\[【]\s*(\d+(?:\s*[,，、;]\s*\d+)*)\s*[\]】]")
_SPLIT = re.compile(r"\s*[,，、;]\s*")
_GONE = "\x00"  # where a removed citation stood, until the clause is tidied
_CONJ = r"(?:,|，|、|;|；|\band\b|\bor\b|以及|和|及|与)"
_FILLER = r"(?:\b(?:also|see|and|or|as|in|cf\.?)\b|参见|另见|详见|见|也)"
_TIDY = (
    (re.compile(rf"{_GONE}\s*{_CONJ}\s*(?=[\[【])", re.I), ""),  # "[7] and [2]" -> "[2]"
    (re.compile(rf"(?<=[\]】])\s*{_CONJ}\s*{_GONE}", re.I), ""),  # "[2] and [7]" -> "[2]"
    (re.compile(rf"[(（]\s*(?:{_FILLER}\s*)*{_GONE}\s*[)）]", re.I), ""),  # "(see [7])"
    # a sentence left with only filler words: "Also see [7]." goes entirely
    (
        re.compile(rf"(^|(?<=[.!?。！？]))\s*(?:{_FILLER}[\s:：]*)*{_GONE}\s*[.!?。！？]", re.I),
        r"\1",
    ),
    (re.compile(rf"[ \t]*{_GONE}"), ""),
    (re.compile(r"[ \t]+([.,;:!?。，；：！？])"), r"\1"),
    (re.compile(r"[ \t]{2,}"), " "),
)


@dataclass
class CitationCheck:
    """The cleaned text, the valid passage numbers cited (first use order),
    and the invalid numbers that were removed (with their count)."""

    text: str
    cited: list[int] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)


def _render(numbers: list[int]) -> str:
    return "[" + ", ".join(str(n) for n in dict.fromkeys(numbers)) + "]"


def check_citations(text: str, valid: Collection[int]) -> CitationCheck:
    """Keep citations naming a passage number in ``valid``; drop and report the rest."""
    cited: dict[int, None] = {}
    removed: list[int] = []

    def fix(m: re.Match[str]) -> str:
        keep = []
        for part in _SPLIT.split(m.group(1)):
            n = int(part)
            if n in valid:
                keep.append(n)
                cited.setdefault(n, None)
            else:
                removed.append(n)
        return _render(keep) if keep else _GONE

    cleaned = _CITE.sub(fix, text)
    if removed:
        for pattern, repl in _TIDY:
            cleaned = pattern.sub(repl, cleaned)
    return CitationCheck(cleaned.strip(), list(cited), removed)


def renumber(text: str, mapping: dict[int, int]) -> str:
    """Rewrite every ``[n]`` with ``mapping[n]`` (numbers not in it are kept)."""
    return _CITE.sub(
        lambda m: _render([mapping.get(int(p), int(p)) for p in _SPLIT.split(m.group(1))]), text
    )


def reading_order(cited: list[int], total: int) -> dict[int, int]:
    """Old passage number -> new: cited ones first (first citation order), then the rest."""
    order = [*dict.fromkeys(cited), *(n for n in range(1, total + 1) if n not in cited)]
    return {old: new for new, old in enumerate(order, start=1)}


class CitationStream:
    """Renumber citations of a streamed answer, and drop invalid ones, as it arrives.

    Numbers are given in order of first citation, as :func:`reading_order`
    does for the final text. Text streams through at once, except a trailing
    "citation zone" — citations, the filler words and conjunctions around
    them ("see also", "and") and a word still being written — which is held
    until something else follows, so an invalid citation goes with its clause.
    """

    _ZONE = re.compile(
        rf"(?:{_FILLER}|{_CONJ}|[\[【][\d\s,，、;]*[\]】]?|[\s:：])*[^\W\d_]{{0,12}}$", re.I
    )

    def __init__(self, valid: Collection[int], emit: Callable[[str], None]) -> None:
        self.valid, self.emit = valid, emit
        self.mapping: dict[int, int] = {}
        self.held = ""

    def _fix(self, m: re.Match[str]) -> str:
        keep = []
        for part in _SPLIT.split(m.group(1)):
            n = int(part)
            if n in self.valid:
                keep.append(self.mapping.setdefault(n, len(self.mapping) + 1))
        return _render(keep) if keep else _GONE

    def _out(self, text: str) -> None:
        text = _CITE.sub(self._fix, text)
        if _GONE in text:
            for pattern, repl in _TIDY:
                text = pattern.sub(repl, text)
        if text:
            self.emit(text)

    def feed(self, piece: str) -> None:
        text = self.held + piece
        m = self._ZONE.search(text)
        cut = m.start() if m and len(text) - m.start() <= 80 else len(text)
        self.held = text[cut:]
        if cut:
            self._out(text[:cut])

    def close(self) -> None:
        if self.held:
            self._out(self.held)
            self.held = ""
