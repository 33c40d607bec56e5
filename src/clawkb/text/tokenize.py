"""The one tokenizer for documents and queries (ARCHITECTURE.md, `text/`).

What you can find, and how. Text is NFKC-normalised first (full-width
``ＳＴＭ３２`` is ``STM32``, ``Ω`` is ``ω``, ``℃`` is ``°C``) and every token is
case-folded, so case never matters. Tokens come out in order of appearance
with duplicates kept, because the index counts term frequency from them.

**Chinese, Japanese kana and Korean hangul** need no dictionary: each run of
such characters yields every character, then every adjacent pair.
``走线阻抗`` gives ``走 线 阻 抗 走线 线阻 阻抗``, so any substring of a run
is found. CJK punctuation (``。，、：；！？“”（）《》【】``...) separates and
is never a token. ``DDR4走线`` is two runs: ``ddr4`` and ``走 线 走线``.

**Everything else** is cut into *runs* at whitespace, CJK text and *hard*
separators: ``( ) [ ] { } < > " ' ` , ; = | ! ? * & ^ $``, general
punctuation (dashes, curly quotes, bullets, ellipsis, zero-width space), arrows
and box drawing. Other symbols (``. _ - / \\ : + # @ ~ % ± °``...) stay inside
a run. Each run is stripped of leading and trailing symbols (``end.`` is
``end``, ``(foo)`` is ``foo``, ``±10%`` is ``10``), except that a trailing
``++`` or ``#`` is kept (``c++``, ``c#``). A run that is then a plain word or
number (``linux``, ``Linux``, ``GPIO``, ``2024``) is one token. Otherwise the
run is kept **whole and also split into parts**, each part emitted once per
run:

1. *segments*, split at symbols other than ``. _ -``:
   ``drivers/net/eth.c`` gives ``drivers net eth.c``; ``50Ω±10%`` gives
   ``50ω±10``, ``50ω``, ``10``;
2. *words*, the letter-and-digit stretches: ``eth.c`` gives ``eth``;
   ``CONFIG_SMP`` gives ``config smp``; ``0x4001_3000`` gives ``0x4001 3000``;
3. *pieces*, cutting words where letters meet digits and at CamelCase humps:
   ``STM32F401RE`` gives ``stm 32 401 re``, plus each letters+digits pair of
   three or more characters (``stm32 f401``); ``HAL_GPIO_WritePin`` gives
   ``write pin``; ``getHTTPResponse`` gives ``get http response``. Letter
   stretches of up to three characters are not CamelCase-split, so units stay
   whole (``100MHz`` gives ``100 mhz``; ``2.2uF`` gives ``uf``);
4. *number forms*: dotted numbers whole and with their leading prefixes
   (``v5.15.32`` gives ``5.15.32 5.15``, ``192.168.1.10`` gives ``192.168``
   and ``192.168.1``); hex literals without ``0x`` and without digit-group
   underscores (``0x4001_3000`` gives ``0x40013000 4001_3000 40013000``, so a
   query typed either way matches); underscore-grouped decimals joined
   (``1_000_000`` gives ``1000000``).

Parts that are a single ASCII letter (the ``f`` in ``STM32F401RE``, the ``c``
of ``eth.c``, the ``v`` of ``3.3V``) are dropped: they match nearly every
document and only bloat the index; a run that *is* one letter is still a token.
Single digits and single non-ASCII letters (``ω`` of ``50Ω``) are kept. Any
token longer than 64 characters is dropped (not truncated: a prefix would
falsely match other long strings); its parts are still emitted. No stop words:
ranking handles them.

**English word forms**: a plain word of four or more ASCII letters is
followed by its Snowball stem when that differs (``pipelining`` gives
``pipelining pipelin``, ``Pipeline`` gives ``pipeline pipelin``), so word forms
meet on the stem while the exact form still counts double. A run that is split
into parts (``CONFIG_SMP``, ``ObserverEvent``, ``eth.c``, ``0x4001``, ``STM32``)
is an identifier: neither it nor its parts are stemmed.

CamelCase splitting needs the original case, so ``tokenize(normalize(x))``
can be *smaller* than ``tokenize(x)`` but never has tokens it lacks (for
ordinary text) other than the stems of runs lower-casing made plain words: a
lower-case query still finds a CamelCase document.
"""

from __future__ import annotations

import functools
import re
from operator import add

import Stemmer

from clawkb.text.normalize import nfkc, normalize

__all__ = [
    "MAX_TOKEN_LEN",
    "NATIVE_INVERT",
    "NATIVE_TOKENIZER",
    "TOKENIZER_VERSION",
    "TextInverter",
    "normalize",
    "tokenize",
]

#: Bump whenever the output of :func:`tokenize` changes: indexes record it.
TOKENIZER_VERSION = "2"  # 2: English stems (Snowball) after plain words

#: Longer tokens are dropped (their parts are still emitted).
MAX_TOKEN_LEN = 64

# Han (with radicals, iteration marks, compatibility and supplementary
# ideographs), bopomofo, kana (without the ・ middle dot) and hangul.
_CJK = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3031-\u3035"
    "\u3038-\u303c\u3040-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3100-\u318f"
    "\u31a0-\u31bf\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f"
    "\uac00-\ud7ff\uf900-\ufaff\U00020000-\U0003ffff"
)
# Characters that end a run without ever being part of a token.
_HARD = (
    "()\\[\\]{}<>\"'`,;=|!?*&^$"
    "\u00a1\u00a7\u00ab\u00b6\u00b7\u00bb\u00bf"
    "\u2000-\u206f\u2190-\u21ff\u2500-\u257f"
    "\u3000-\u3004\u3008-\u3020\u302a-\u3030\u3036\u3037\u303d-\u303f"
    "\u30a0\u30fb\ufe10-\ufe1f\ufe30-\ufe4f\uff00-\uff0f\uff1a-\uff20"
    "\uff3b-\uff40\uff5b-\uff65"
)
_SEP = rf"\s{_HARD}{_CJK}"


# One scan finds every run: a CJK run or a run of anything else. These two
# big character classes take ~0.1 s to compile, and only the pure-Python path
# needs them, so they are compiled on its first use (a fresh `clawkb search`
# with the native tokenizer never pays for them).
@functools.cache
def _run_re() -> re.Pattern[str]:
    return re.compile(rf"[{_CJK}]+|[^{_SEP}]+")


@functools.cache
def _cjk_start_re() -> re.Pattern[str]:
    return re.compile(rf"[{_CJK}]")


# The run without leading/trailing symbols; a trailing ++ or # survives.
_CORE = re.compile(r"[^\W_](?:.*[^\W_])?(?:\+\+|#)?", re.DOTALL)
_SEGMENT_SPLIT = re.compile(r"[^\w.\-]+")
_WORD = re.compile(r"[^\W_]+")
_PIECE = re.compile(r"[^\W\d_]+|\d+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z]{2})|[A-Z]+(?![a-z]{2})|[A-Z]?[a-z]+")
_DOTTED = re.compile(r"\d+(?:\.\d+)+")
_HEX = re.compile(r"(?<![^\W_])0[xX][0-9a-fA-F]+(?:_[0-9a-fA-F]+)*(?![^\W_])")
_HEX_WORD = re.compile(r"0[xX][0-9a-fA-F]+")
_DIGIT_GROUPS = re.compile(r"(?<![^\W_])\d+(?:_\d+)+(?![^\W_])")


# Run -> its tokens. Text is Zipfian, so most runs were seen before and cost
# one dict lookup; the bound keeps memory flat on endless unique strings.
# Only the speed depends on it, never the output.
_CACHE: dict[str, tuple[str, ...]] = {}
_CACHE_MAX_ENTRIES = 65_536
_CACHE_MAX_RUN = 32

# The C module (_toknative.c) does run splitting, CJK runs and plain words and
# calls _expand_run for the rest: same output, several times faster.
try:
    from clawkb.text import _toknative as _native  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - no compiler on this machine
    _native = None

#: True when the native tokenizer is in use.
NATIVE_TOKENIZER = _native is not None


#: True when documents can be tokenized and inverted in one native pass (TextInverter).
NATIVE_INVERT = _native is not None and hasattr(_native, "invert_new")


class TextInverter:
    """Tokenize documents and count their terms in C, one segment's worth.

    No token string is made for a token seen before: the index needs only
    term hashes (:func:`clawkb.index.segment.term_hash`), and the C side keeps
    the hashes of each non-CJK run's tokens. The tokens are those of
    :func:`tokenize` (the same C code makes them). Native only
    (:data:`NATIVE_INVERT`).
    """

    def __init__(self) -> None:
        assert _native is not None, "TextInverter needs the native tokenizer"
        self._state = _native.invert_new()

    def add(
        self, docs: list[tuple[int, str | list[str], str | list[str], str | list[str]]]
    ) -> bytes:
        """Count ``(doc number, title, body, code)`` rows, doc numbers ascending; a
        field is text (tokenized here) or a token list. Returns the token count
        of each field as uint32 bytes, ``[len(docs), 3]``."""
        assert _native is not None
        rows = [(d, *(nfkc(f) if isinstance(f, str) else f for f in fields)) for d, *fields in docs]
        counts: bytes = _native.invert_add(self._state, rows, _CACHE, _expand_run, _STEMS, stem_of)
        return counts

    def finish(self) -> tuple[bytes, bytes, bytes, bytes, bytes]:
        """(sorted unique term hashes uint64, then per (term, doc, field) entry: the
        term's rank in those hashes uint32, doc uint32, field uint8, frequency
        uint8 saturated at 255); the entries come in the order they were counted."""
        assert _native is not None
        out: tuple[bytes, bytes, bytes, bytes, bytes] = _native.invert_finish(self._state)
        return out


def tokenize(text: str) -> list[str]:
    """Split ``text`` into index/query terms, in order, duplicates kept."""
    if _native is not None:
        return _native.tokenize(nfkc(text), _CACHE, _expand_run, _STEMS, stem_of)
    return tokenize_python(text)


# English word forms: Snowball (PyStemmer, C) adds a plain English word's stem
# right after it when the stem differs, so ``pipelining`` (stem ``pipelin``)
# finds ``Pipeline``. Only plain words of ASCII letters get one: a run the
# tokenizer splits into parts (an identifier: ``CONFIG_SMP``, ``ObserverEvent``,
# ``eth.c``, ``0x4001``, ``stm32``) is never stemmed, nor are its parts, and the
# exact form is always kept beside the stem, so an exact match still scores
# above a match on the stem alone.
_STEMMER = Stemmer.Stemmer("english")
#: word -> stem, "" when it has none (the C path reads and fills it too)
_STEMS: dict[str, str] = {}
#: Shorter words are left alone (Snowball rarely changes them, and when it does,
#: as ``was``/``wa``, it conflates words that are not forms of one another).
STEM_MIN_LEN = 4


def stem_of(word: str) -> str:
    """The Snowball stem of a plain lower-case ASCII word, or "" when it is the word."""
    if len(word) < STEM_MIN_LEN:
        return ""
    st: str = _STEMMER.stemWord(word)
    return "" if st == word else st


def _plain_tokens(token: str) -> tuple[str, ...]:
    """A plain word's tokens: itself, then its stem for an ASCII word."""
    if not (token.isascii() and token.isalpha()):
        return (token,)
    st = _STEMS.get(token)
    if st is None:
        st = stem_of(token)
        if len(_STEMS) >= _CACHE_MAX_ENTRIES:
            _STEMS.clear()
        _STEMS[token] = st
    return (token, st) if st else (token,)


def tokenize_python(text: str) -> list[str]:
    """The reference implementation (the oracle the native one is tested against)."""
    tokens: list[str] = []
    extend = tokens.extend
    cached = _CACHE.get
    for run in _run_re().findall(nfkc(text)):
        found = cached(run)
        if found is None:
            found = _run_tokens(run)
            if len(run) <= _CACHE_MAX_RUN:
                if len(_CACHE) >= _CACHE_MAX_ENTRIES:
                    _CACHE.clear()
                _CACHE[run] = found
        extend(found)
    return tokens


def _run_tokens(run: str) -> tuple[str, ...]:
    """Tokens of one run, CJK or not (see the module docstring)."""
    if _cjk_start_re().match(run):
        if len(run) == 1:
            return (run,)
        return (*run, *map(add, run, run[1:]))
    return _expand_run(run)


def _is_plain(core: str) -> bool:
    """True when ``core`` has no parts worth splitting out."""
    if core.isdecimal():
        return True
    if not core.isalpha():
        return False
    return not core.isascii() or core.islower() or core.isupper() or core[1:].islower()


class _Parts:
    """Ordered, de-duplicated token set for one run (parts repeat a lot)."""

    __slots__ = ("found",)

    def __init__(self) -> None:
        self.found: dict[str, None] = {}

    def whole(self, token: str) -> None:
        """Record a token that stands for the whole run or a segment of it."""
        token = token.casefold()
        if len(token) <= MAX_TOKEN_LEN:
            self.found[token] = None

    def part(self, token: str) -> None:
        """Record a part, unless it is a lone ASCII letter (too common to help)."""
        token = token.casefold()
        if len(token) == 1 and "a" <= token <= "z":
            return
        if len(token) <= MAX_TOKEN_LEN:
            self.found[token] = None


def _expand_run(run: str) -> tuple[str, ...]:
    """Tokens of a non-CJK run: one for a plain word, else the whole plus parts."""
    match = _CORE.search(run)
    if match is None:
        return ()
    core = match.group()
    if _is_plain(core):
        token = core.casefold()
        if len(token) > MAX_TOKEN_LEN:
            return ()
        return _plain_tokens(token) if core.isascii() else (token,)
    parts = _Parts()
    parts.whole(core)
    for segment in _SEGMENT_SPLIT.split(core):
        seg_match = _CORE.search(segment)
        if seg_match is None:
            continue
        seg = seg_match.group()
        parts.part(seg)
        _expand_segment(seg, parts)
    return tuple(parts.found)


def _expand_segment(seg: str, parts: _Parts) -> None:
    """Number forms and words of one segment (no separators but ``. _ -``)."""
    if "." in seg:
        for number in _DOTTED.findall(seg):
            _add_dotted(number, parts)
    if "_" in seg:
        for groups in _DIGIT_GROUPS.findall(seg):
            parts.part(groups.replace("_", ""))
    if "x" in seg or "X" in seg:
        for literal in _HEX.findall(seg):
            _add_hex(literal, parts)
    for word in _WORD.findall(seg):
        parts.part(word)
        _expand_word(word, parts)


def _add_dotted(number: str, parts: _Parts) -> None:
    """A dotted number and its prefixes: ``5.15.32`` also matches ``5.15``."""
    if len(number) > MAX_TOKEN_LEN:
        return
    parts.part(number)
    fields = number.split(".")
    for end in range(2, len(fields)):
        parts.part(".".join(fields[:end]))


def _add_hex(literal: str, parts: _Parts) -> None:
    """Hex spellings a user may type: with/without ``0x`` and underscores."""
    body = literal[2:]
    joined = body.replace("_", "")
    if joined != body:
        parts.part(literal[:2] + joined)
        parts.part(body)
    parts.part(joined)


def _expand_word(word: str, parts: _Parts) -> None:
    """Pieces of one letters-and-digits word (letter/digit and CamelCase cuts)."""
    if _HEX_WORD.fullmatch(word):
        parts.part(word[2:])
        return
    pieces = _PIECE.findall(word)
    previous = ""
    for piece in pieces:
        if len(pieces) > 1:
            parts.part(piece)
            if previous and piece.isdecimal():
                _add_pair(previous + piece, parts)
        if len(piece) > 3 and piece.isascii() and not (piece.islower() or piece.isupper()):
            _add_camel(piece, parts)
        previous = piece


def _add_pair(pair: str, parts: _Parts) -> None:
    """Letters+digits such as ``stm32`` or ``f401``; two characters are too few."""
    pair = pair.casefold()
    if len(pair) >= 3:
        parts.part(pair)


def _add_camel(letters: str, parts: _Parts) -> None:
    """CamelCase humps: ``WritePin`` gives ``write`` and ``pin``."""
    humps = _CAMEL.findall(letters)
    if len(humps) > 1:
        for hump in humps:
            parts.part(hump)
