"""Recognise what a file really is from its first bytes, whatever its name says.

Files lie about their extension: a ``.xlsx`` that is an old OLE2 ``.xls`` (or
a password-protected workbook, which Office wraps in OLE2), a ``.csv`` that is
really a zipped workbook, a ``.html`` that is a PNG. Parsers call
:func:`expect_zip` or :func:`decode_text_or_reject` first, so such a file
fails with one clear line that names the real format instead of a parser
stack trace or garbage slices.

Policy (documented in docs/formats.md): a mismatch is a per-file
:class:`~clawkb.errors.FormatMismatchError`; clawkb does not silently
switch to another parser, because the extension is also what the user sees
and filters on, and a renamed file is usually a mistake worth reporting.
"""

from __future__ import annotations

from clawkb.errors import FormatMismatchError
from clawkb.text.decode import decode_source, looks_binary

#: (magic prefix, human name). Longest / most specific first.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "a PDF document"),
    (
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
        "an OLE2 compound file (legacy .xls/.doc, or a password-protected Office file)",
    ),
    (b"PK\x03\x04", "a ZIP archive"),
    (b"PK\x05\x06", "an empty ZIP archive"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"BZh", "a bzip2 archive"),
    (b"\xfd7zXZ\x00", "an xz archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"Rar!\x1a\x07", "a RAR archive"),
    (b"\x7fELF", "an ELF executable"),
    (b"MZ", "a Windows executable"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"\x00\x00\x01\x00", "an icon image"),
    (b"RIFF", "a RIFF media file"),
    (b"OggS", "an Ogg media file"),
    (b"ID3", "an MP3 audio file"),
    (b"\x1aE\xdf\xa3", "a Matroska/WebM video"),
)


def sniff(data: bytes) -> str | None:
    """A human name for the binary format ``data`` starts with, or ``None``."""
    for magic, name in _MAGIC:
        if data.startswith(magic):
            return name
    if len(data) >= 12 and data[4:8] == b"ftyp":
        return "an MP4/QuickTime media file"
    return None


def is_zip(data: bytes) -> bool:
    return data.startswith((b"PK\x03\x04", b"PK\x05\x06"))


def expect_zip(data: bytes, path: str, what: str) -> None:
    """Refuse anything that is not a ZIP container for a ZIP-based ``what`` (XLSX, DOCX)."""
    if is_zip(data):
        return
    if not data:
        raise FormatMismatchError(path, f"empty file, not a {what}")
    found = sniff(data)
    if found is None:
        found = "text" if _mostly_text(data[:512]) else "unknown binary data"
    raise FormatMismatchError(path, f"content is {found}, not a {what} (the extension lies)")


def decode_text_or_reject(data: bytes, path: str, what: str) -> tuple[str, str]:
    """Decode a text format, naming the real format when the bytes are a known binary one."""
    found = sniff(data)
    # Short magics ("MZ", "BZh", "ID3") can start real text, so a text file is only
    # refused when the bytes are binary too; a PDF is refused on its header alone.
    if found is not None and (data.startswith(b"%PDF-") or looks_binary(data)):
        hint = " (rename it to .xlsx/.docx?)" if found == "a ZIP archive" else ""
        raise FormatMismatchError(path, f"content is {found}, not {what}{hint}")
    return decode_source(data, path)


def _mostly_text(head: bytes) -> bool:
    if not head:
        return True
    printable = sum(1 for b in head if b in b"\t\n\r" or 32 <= b < 127 or b >= 0x80)
    return printable / len(head) > 0.95
