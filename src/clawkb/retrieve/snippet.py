"""Pick the part of a chunk worth showing and where the query terms are in it.

A snippet is the file's own text (full-width punctuation, case and symbols as
written), made readable on one line: table rows become ``cell | cell`` with
the ``|---|`` rule dropped, and markup noise (template tags such as
``{{#include …}}``, HTML comments and stray HTML tags) is left out. The
stored chunk text is untouched. Query terms are normalised tokens, so matches
are found in a normalised copy and mapped back to offsets in the snippet.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

from clawkb.text.normalize import nfkc

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
_TABLE_ROW = re.compile(r"^\s*\|(.*)\|\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_HTML_TAGS = (
    "a|abbr|b|blockquote|br|center|code|details|div|em|figcaption|figure|font|h[1-6]|hr|i|"
    "iframe|img|kbd|li|ol|p|pre|section|small|span|strong|sub|summary|sup|table|tbody|td|"
    "th|thead|tr|u|ul"
)
_MARKUP = re.compile(
    r"\{\{[#%!/>]?[^{}\n]{0,200}\}\}"  # {{#include file.rs}}, {{ variable }}
    r"|\{%[^%\n]{0,200}%\}"  # {% tag %}
    r"|<!--.*?-->"  # HTML comments
    rf"|</?(?:{_HTML_TAGS})(?:\s[^<>]{{0,300}})?/?>",  # stray HTML tags, not <stdio.h>
    re.IGNORECASE | re.DOTALL,
)


@lru_cache(maxsize=512)
def _highlighted(terms: tuple[str, ...]) -> tuple[str, ...]:
    """The terms worth highlighting, longest first.

    Single CJK characters are only highlighted when no longer term is given,
    and single Latin letters/digits never: they would light up everything.
    """
    keep = [t for t in terms if len(t) > 1 or (_CJK.match(t) and len(terms) <= 2)]
    return tuple(sorted(set(keep), key=len, reverse=True))


@lru_cache(maxsize=512)
def _patterns(terms: tuple[str, ...], fold: bool = True) -> re.Pattern[str] | None:
    """One regex for the terms worth highlighting (longest first).

    ``fold``: match case-insensitively. Without it :func:`window` needs no
    regex at all (:func:`_literal_spans`), and it drops it when that cannot
    change a match (see :func:`_caseless`).
    """
    keep = _highlighted(terms)
    if not keep:
        return None
    return re.compile("|".join(re.escape(t) for t in keep), re.IGNORECASE if fold else 0)


def _literal_spans(text: str, keep: tuple[str, ...]) -> list[tuple[int, int]]:
    """What ``finditer`` of the case-sensitive :func:`_patterns` regex finds, by ``str.find``.

    The regex tries the terms longest first at each position and resumes after
    a match: so the match at a position is the longest term found there, and
    the next match starts at the first such position at or after the previous
    end. Compiling that regex costs more than a query's ten snippets (every
    query has its own terms), searching with ``str.find`` about the same.
    """
    longest: dict[int, int] = {}  # start -> end of the longest term found there
    for t in keep:  # longest first: a position keeps the first (longest) term seen
        n = len(t)
        i = text.find(t)
        while i >= 0:
            if i not in longest:
                longest[i] = i + n
            i = text.find(t, i + 1)
    spans, pos = [], 0
    for s in sorted(longest):
        if s >= pos:
            pos = longest[s]
            spans.append((s, pos))
    return spans


def _caseless(text: str) -> bool:
    """True when case-insensitive matching can match ``text`` to nothing but itself.

    So it is for lower-case ASCII with non-ASCII characters that have no case
    (CJK, full-width punctuation): what normalised (NFKC + case-folded) text
    and query tokens almost always are. Letters with case outside ASCII
    (Greek, Cyrillic, dotless i, ...) keep the case-insensitive regex.
    """
    if text != text.lower():
        return False
    # bytes.upper() changes ASCII letters only: equal means no other letter has case
    return text.isascii() or text.upper() == text.encode("utf-8").upper().decode("utf-8")


@lru_cache(maxsize=512)
def _terms_caseless(terms: tuple[str, ...]) -> bool:
    return all(_caseless(t) for t in terms)


def display_text(text: str) -> str:
    """The chunk's text on one line, as written, without table rules or markup noise."""
    if "|" in text:
        text = _tables(text)
    if "<" in text or "{" in text:
        text = _MARKUP.sub(" ", text)
    return " ".join(text.split())


def _tables(text: str) -> str:
    out: list[str] = []
    in_table = False
    for line in text.split("\n"):
        m = _TABLE_ROW.match(line)
        if m is None:
            out.append(line)
            in_table = False
            continue
        if _TABLE_RULE.match(line):
            continue
        row = " | ".join(c.strip() for c in m.group(1).split("|"))
        if in_table and out:
            out[-1] += " ;"
        out.append(row)
        in_table = True
    return "\n".join(out)


def _normalised(text: str) -> tuple[str, list[int] | None]:
    """NFKC + case-folded ``text`` and, when lengths differ, where each char came from.

    The map has one entry per normalised character plus one for the end;
    ``None`` means position ``i`` is position ``i`` in ``text``.
    """
    if text.isascii():
        return text.lower(), None
    whole = nfkc(text).casefold()
    if len(whole) == len(text):  # one character for one (CJK, full-width forms): the
        return whole, None  # usual case; an expansion cancelled by a composition is not
    parts: list[str] = []
    back: list[int] = []
    pos, identity = 0, True
    for m in _NON_ASCII.finditer(text):
        s, e = m.span()
        parts.append(text[pos:s].lower())
        back += range(pos, s)
        run = unicodedata.normalize("NFKC", text[s:e]).casefold()
        if len(run) == e - s:  # one character for one (CJK, full-width punctuation)
            parts.append(run)
            back += range(s, e)
        else:  # ligatures, ß, composed forms: map character by character
            identity = False
            for i in range(s, e):
                ch = unicodedata.normalize("NFKC", text[i]).casefold()
                parts.append(ch)
                back += [i] * len(ch)
        pos = e
    parts.append(text[pos:].lower())
    back += range(pos, len(text) + 1)
    return "".join(parts), None if identity else back


class Prepared:
    """A chunk made ready for snippets: display text, its normalised form, the offset map.

    ``back`` maps a normalised offset to a display offset (``None``: the same
    offset). What only some uses need (whether the text is caseless, its set
    of characters) is computed on first use and kept.
    """

    __slots__ = ("_caseless", "_chars", "back", "flat", "norm")

    def __init__(
        self, flat: str, norm: str, back: list[int] | None, caseless: bool | None = None
    ) -> None:
        self.flat, self.norm, self.back = flat, norm, back
        self._caseless = caseless
        self._chars: frozenset[str] | None = None

    @property
    def caseless(self) -> bool:
        if self._caseless is None:
            self._caseless = _caseless(self.norm)
        return self._caseless

    @property
    def chars(self) -> frozenset[str]:
        """The characters of the normalised form: a fast first test for many terms."""
        if self._chars is None:
            self._chars = frozenset(self.norm)
        return self._chars


def prepare(text: str) -> Prepared:
    """The display text, its normalised form and the offset map: what :func:`window` needs.

    The normalised form also serves for the "matched terms" test, so a hit
    normalises its text once.
    """
    flat = display_text(text)
    norm, back = _normalised(flat)
    return Prepared(flat, norm, back)


def pattern_for(prepared: Prepared, terms: tuple[str, ...]) -> re.Pattern[str] | None:
    """The terms' regex for this text: case-sensitive when that matches the same."""
    return _patterns(terms, not (_terms_caseless(terms) and prepared.caseless))


def window(
    prepared: Prepared, terms: Sequence[str], width: int = 240
) -> tuple[str, tuple[tuple[int, int], ...]]:
    """A window of the display text around the densest matches, and the match spans."""
    flat, norm, back = prepared.flat, prepared.norm, prepared.back
    terms = tuple(terms)
    keep = _highlighted(terms)
    if not keep:
        return _cut(flat, 0, width), ()
    if _terms_caseless(terms) and prepared.caseless:  # a literal search finds the same
        found = _literal_spans(norm, keep)
    else:
        pat = _patterns(terms, True)
        assert pat is not None
        found = [m.span() for m in pat.finditer(norm)]
    spans = [(s, e) for s, e in found if _at_boundaries(norm, s, e)]
    if back is not None:
        spans = [(back[s], back[e - 1] + 1) for s, e in spans]
    if not spans:
        return _cut(flat, 0, width), ()
    best_start, best_count, j = 0, -1, 0
    for i, (s, _) in enumerate(spans):  # spans are in order: a sliding window
        j = max(j, i)
        while j < len(spans) and spans[j][0] < s + width:
            j += 1
        if j - i > best_count:
            best_start, best_count = s, j - i
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


def make_snippet(
    text: str, terms: Sequence[str], width: int = 240
) -> tuple[str, tuple[tuple[int, int], ...]]:
    """Return a window of ``text`` around the densest matches, and match spans."""
    return window(prepare(text), terms, width)


def _is_cjk(c: str) -> bool:
    """``_CJK.match(c)`` for one character, without the regex call."""
    return (
        "\u3040" <= c <= "\u30ff"
        or "\u3400" <= c <= "\u4dbf"
        or "\u4e00" <= c <= "\u9fff"
        or "\uac00" <= c <= "\ud7af"
        or "\uf900" <= c <= "\ufaff"
    )


def _boundary(text: str, i: int) -> bool:
    """Could a token start or end at ``i``? (What the tokenizer splits on.)"""
    if i <= 0 or i >= len(text):
        return True
    a, b = text[i - 1], text[i]
    if not (a.isalnum() and b.isalnum()):
        return True
    if (a > "\x7f" and _is_cjk(a)) or (b > "\x7f" and _is_cjk(b)):
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
