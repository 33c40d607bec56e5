"""Turn raw file bytes into text, guessing the encoding the way engineers' files need.

Engineers' notes are mostly UTF-8, but Chinese teams still produce GBK/GB18030
files (Windows editors, exported datasheets), Windows tools write UTF-16 with a
BOM, and old English docs are Latin-1/CP1252. The order of attempts is chosen
so the cheap, certain answers come first:

1. a byte-order mark (UTF-32 before UTF-16, because the UTF-32-LE BOM starts
   with the UTF-16-LE one),
2. strict UTF-8,
3. GB18030, but only when the decoded text is dominated by common GB2312
   characters — Latin-1 text often *decodes* as GB18030 ("für" is a valid
   two-byte sequence) yet yields rare characters, so decodability alone is
   not evidence,
3b. UTF-8 or GB18030 with a few damaged bytes, decoded with U+FFFD for them
   (a truncated or stray byte must not turn a Chinese file into mojibake),
4. CP1252 when the text reads like accented Western-European prose,
5. charset-normalizer's best guess (slow, so only as a fallback),
6. otherwise :class:`~clawkb.errors.DecodeError`.

Newlines are normalised to ``\\n`` so line numbers match what editors show.
"""

from __future__ import annotations

import codecs
import re
import unicodedata

from clawkb.errors import DecodeError, UnsupportedFileError

#: BOMs in the order they must be tested (longest first where prefixes collide).
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

_SNIFF_BYTES = 8192
#: Characters examined by the GB18030 / CP1252 plausibility checks.
_SAMPLE_CHARS = 65536
#: Control bytes that ordinary text files contain.
_TEXT_CONTROLS = frozenset(b"\t\n\r\f\b\x1b\x0b")
#: Share of other control bytes above which a file is treated as binary.
_MAX_CONTROL_SHARE = 0.10
#: Share of non-ASCII characters that must be common GB2312 characters.
_MIN_GB_SHARE = 0.9
#: Share of non-ASCII characters that must sit next to another one.
_MIN_RUN_SHARE = 0.5
#: Most undecodable characters, per well-decoded non-ASCII one, in a damaged file.
_MAX_DAMAGE_SHARE = 0.02
#: Most accented letters per letter a Western-European text plausibly has.
_MAX_ACCENT_SHARE = 0.4
_WESTERN_SYMBOLS = frozenset("\u00a0“”‘’–—…•·°±×÷©®™€£¥§¶µ«»¿¡¢¼½¾²³¹ºª¨´¸¯¦¬")
_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")


def looks_binary(data: bytes) -> bool:
    """True when ``data`` is very likely not text (images, archives, objects).

    A NUL byte in the first 8 KB is the classic signal, except in UTF-16/32
    files, which are full of NULs but announce themselves with a BOM.
    """
    if _bom_encoding(data) is not None:
        return False
    head = data[:_SNIFF_BYTES]
    if not head:
        return False
    if b"\x00" in head:
        return True
    controls = sum(1 for b in head if b < 0x20 and b not in _TEXT_CONTROLS)
    return controls / len(head) > _MAX_CONTROL_SHARE


def decode_text(data: bytes, path: str) -> tuple[str, str]:
    """Decode ``data`` and return ``(text, encoding)`` with newlines normalised.

    Raises :class:`DecodeError` naming ``path`` when no encoding fits.
    """
    text, encoding = _decode(data, path)
    return normalize_newlines(text), encoding


def decode_source(data: bytes, path: str) -> tuple[str, str]:
    """What parsers call: refuse binary content, then decode.

    Raises :class:`UnsupportedFileError` for binary data so the ingest
    pipeline can skip the file with a one-line reason.
    """
    if looks_binary(data):
        raise UnsupportedFileError(path, "binary file, skipped")
    return decode_text(data, path)


def normalize_newlines(text: str) -> str:
    """CRLF and lone CR become LF, so ``text.split("\\n")`` gives editor lines."""
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _bom_encoding(data: bytes) -> str | None:
    for bom, name in _BOMS:
        if data.startswith(bom):
            return name
    return None


def _decode(data: bytes, path: str) -> tuple[str, str]:
    bom_name = _bom_encoding(data)
    if bom_name is not None:
        return _decode_with_bom(data, bom_name)
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    gb_text = _try_gb18030(data)
    if gb_text is not None:
        return gb_text, "gb18030"
    damaged = _try_damaged(data)
    if damaged is not None:
        return damaged
    western = _try_western(data)
    if western is not None:
        return western, "cp1252"
    guessed = _charset_normalizer_guess(data)
    if guessed is not None:
        return guessed
    raise DecodeError(path, "cannot decode: not UTF-8/16/32, GB18030 or any detectable encoding")


def _decode_with_bom(data: bytes, name: str) -> tuple[str, str]:
    """A BOM is an explicit declaration, so trust it and replace stray bad bytes."""
    if name == "utf-8-sig":
        return data.decode("utf-8-sig", errors="replace"), name
    bom_len = 4 if name.startswith("utf-32") else 2
    return data[bom_len:].decode(name, errors="replace"), name


def _try_gb18030(data: bytes) -> str | None:
    """Decode as GB18030 only if the result reads like Chinese text."""
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError:
        return None
    return text if _looks_chinese(text[:_SAMPLE_CHARS]) else None


def _try_damaged(data: bytes) -> tuple[str, str] | None:
    """UTF-8 or GB18030 text with a few bad bytes (a cut-off character, a stray byte).

    Decoded leniently (bad bytes become U+FFFD) when the damage is a small
    share of the non-ASCII characters and the rest reads as that encoding:
    otherwise detection would pick a code page that decodes every byte and
    turn the whole file into mojibake (Thai, Cyrillic, UTF-16).
    """
    for encoding in ("utf-8", "gb18030"):
        text = data.decode(encoding, errors="replace")
        sample = text[:_SAMPLE_CHARS]
        bad = sample.count("\ufffd")
        good = sum(1 for ch in sample if ord(ch) > 0x7F) - bad
        if good < 1 or bad > max(1, good * _MAX_DAMAGE_SHARE):
            continue
        if encoding == "utf-8" or _looks_chinese(sample.replace("\ufffd", "")):
            return text, encoding
    return None


def _looks_chinese(text: str) -> bool:
    """Most non-ASCII characters are common GB2312 ones and come in runs.

    Mis-decoded Latin-1 ("Größe" -> "Gr" + one hanzi + "e") gives isolated
    characters wedged between ASCII letters; Chinese words are runs.
    """
    runs = _NON_ASCII_RUN.findall(text)
    total = sum(len(run) for run in runs)
    if total == 0:
        return False
    common = sum(1 for run in runs for ch in run if _in_gb2312(ch))
    in_long_runs = sum(len(run) for run in runs if len(run) >= 2)
    return common / total >= _MIN_GB_SHARE and in_long_runs / total >= _MIN_RUN_SHARE


def _in_gb2312(ch: str) -> bool:
    try:
        encoded = ch.encode("gb2312")
    except UnicodeEncodeError:
        return False
    return len(encoded) == 2


def _try_western(data: bytes) -> str | None:
    """Decode as CP1252 (a Latin-1 superset) when it reads like Western text.

    charset-normalizer often picks a neighbouring code page for short Latin-1
    files (cp1250 turns "crème" into "crčme"), so the common case is decided
    here: accented Latin letters and typographic punctuation, sparse among
    ASCII letters. Cyrillic in cp1251 also decodes to Latin letters, but as
    whole words of them, which the density check rejects.
    """
    try:
        text = data.decode("cp1252")
    except UnicodeDecodeError:
        return None
    sample = text[:_SAMPLE_CHARS]
    non_ascii = [ch for ch in sample if ord(ch) > 0x7F]
    letters = sum(1 for ch in sample if ch.isalpha())
    accented = sum(1 for ch in non_ascii if ch.isalpha())
    if not non_ascii or letters == 0 or accented / letters > _MAX_ACCENT_SHARE:
        return None
    if all(_is_western_char(ch) for ch in non_ascii):
        return text
    return None


def _is_western_char(ch: str) -> bool:
    if ch in _WESTERN_SYMBOLS:
        return True
    return unicodedata.name(ch, "").startswith("LATIN ")


def _charset_normalizer_guess(data: bytes) -> tuple[str, str] | None:
    from charset_normalizer import from_bytes  # imported lazily: slow to import

    best = from_bytes(data).best()
    if best is None or best.encoding is None:
        return None
    return str(best), best.encoding
