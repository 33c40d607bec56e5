"""Check an answer's ``[n]`` citations against the passages it was given.

A model may cite ``[7]`` when the context had five passages, or invent a
citation style. Every ``[n]`` (also ``[1, 2]``, ``[1][2]`` and full-width
``【1】``) that does not name a passage in the context is removed from the
text and reported, so each citation a user sees is traceable to a source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["CitationCheck", "check_citations"]

_CITE = re.compile(r"[\[【]\s*(\d+(?:\s*[,，、;]\s*\d+)*)\s*[\]】]")
_SPLIT = re.compile(r"\s*[,，、;]\s*")


@dataclass
class CitationCheck:
    """The cleaned text, the valid passage numbers cited (first use order),
    and the invalid numbers that were removed (with their count)."""

    text: str
    cited: list[int] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)


def check_citations(text: str, valid: set[int] | range) -> CitationCheck:
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
        return "[" + ", ".join(str(n) for n in dict.fromkeys(keep)) + "]" if keep else ""

    cleaned = _CITE.sub(fix, text)
    if removed:  # tidy the gaps left behind: "word [9]." -> "word."
        cleaned = re.sub(r"[ \t]+([.,;:!?。，；：！？])", r"\1", cleaned)
        cleaned = re.sub(r"[ \t]{2,}", " ", cleaned)
    return CitationCheck(cleaned, list(cited), removed)
