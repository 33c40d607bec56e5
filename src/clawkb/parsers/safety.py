"""Limits that keep hostile or broken files from hurting an indexing run.

Office files (XLSX, DOCX) are ZIP archives of XML, which invites two classic
attacks: the *zip bomb* (a few KB that inflate to gigabytes) and the *billion
laughs* (nested XML entities that expand exponentially). The ZIP central
directory can lie about sizes, so :func:`verify_zip` actually inflates every
member in a streaming loop and stops as soon as a limit is crossed, before any
library touches the archive. OOXML never contains a DTD, so any ``<!DOCTYPE``
or ``<!ENTITY`` in a member is refused outright instead of trying to decide
whether its entities are harmless.

:func:`guard` turns whatever a third-party library throws on corrupt input
into a :class:`~clawkb.errors.ParseError` naming the file, so the pipeline
reports one line and the run goes on; recursion and memory blow-ups become
:class:`~clawkb.errors.UnsafeFileError`.
"""

from __future__ import annotations

import bz2
import io
import lzma
import re
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from clawkb.errors import ClawkbError, ParseError, UnsafeFileError

if TYPE_CHECKING:
    #: An incremental decompressor (only zlib's has ``unconsumed_tail``).
    _Decompressor: TypeAlias = zlib._Decompress | bz2.BZ2Decompressor | lzma.LZMADecompressor

_MIB = 1024 * 1024
_READ = 256 * 1024
#: Decompressors that say when they need more input (zlib's does not).
_STREAMED = (bz2.BZ2Decompressor, lzma.LZMADecompressor)
_DTD = re.compile(rb"<!\s*(?:DOCTYPE|ENTITY)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ZipLimits:
    """Ceilings for one archive; defaults are far above any real workbook or report."""

    max_members: int = 10_000
    max_member_bytes: int = 256 * _MIB
    max_total_bytes: int = 1024 * _MIB
    #: Inflated/compressed size ratio above which a large member is a bomb.
    max_ratio: float = 250.0
    #: Members smaller than this may have any ratio (tiny XML compresses well).
    ratio_floor_bytes: int = 4 * _MIB


DEFAULT_ZIP_LIMITS = ZipLimits()


def verify_zip(data: bytes, path: str, limits: ZipLimits = DEFAULT_ZIP_LIMITS) -> list[str]:
    """Inflate every member under the limits; return the member names.

    Raises :class:`UnsafeFileError` for a bomb or a DTD in an XML member and
    :class:`ParseError` for an archive that is corrupt.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except Exception as exc:  # zipfile raises many types on garbage headers
        raise ParseError(path, f"corrupt ZIP container: {exc}") from None
    with archive:
        infos = archive.infolist()
        if len(infos) > limits.max_members:
            raise UnsafeFileError(
                path, f"ZIP holds {len(infos)} members (limit {limits.max_members})"
            )
        total = 0
        for info in infos:
            if info.flag_bits & 0x1:
                raise ParseError(path, f"ZIP member {info.filename} is encrypted")
            total += _inflate_checked(archive, info, path, limits, limits.max_total_bytes - total)
        return [info.filename for info in infos]


def _inflate_checked(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: str, limits: ZipLimits, room: int
) -> int:
    """Stream one member, counting real bytes; return its inflated size."""
    size = 0
    is_xml = info.filename.lower().endswith((".xml", ".rels", ".vml"))
    tail = b""
    try:
        with archive.open(info) as fh:
            while chunk := fh.read(_READ):
                size += len(chunk)
                if size > limits.max_member_bytes or size > room:
                    raise UnsafeFileError(path, _bomb_reason(info, size, limits, room))
                ratio = size / max(info.compress_size, 1)
                if size > limits.ratio_floor_bytes and ratio > limits.max_ratio:
                    raise UnsafeFileError(
                        path,
                        f"ZIP member {info.filename} inflates {ratio:.0f}x "
                        f"(limit {limits.max_ratio:.0f}x): zip bomb refused",
                    )
                if is_xml and _DTD.search(tail + chunk):
                    raise UnsafeFileError(
                        path,
                        f"{info.filename} declares a DTD (<!DOCTYPE>/<!ENTITY>), which Office "
                        "files never need: refused (entity-expansion attack)",
                    )
                tail = chunk[-16:]
    except UnsafeFileError:
        raise
    except (
        zipfile.BadZipFile,
        zlib.error,
        EOFError,
        OSError,
        NotImplementedError,
        ValueError,
    ) as exc:
        raise ParseError(path, f"corrupt ZIP member {info.filename}: {exc}") from None
    return size


def _bomb_reason(info: zipfile.ZipInfo, size: int, limits: ZipLimits, room: int) -> str:
    if size > limits.max_member_bytes:
        return (
            f"ZIP member {info.filename} inflates beyond {limits.max_member_bytes // _MIB} MB:"
            " zip bomb refused"
        )
    total = limits.max_total_bytes // _MIB
    return f"ZIP members inflate beyond {total} MB in total (at {info.filename}): zip bomb refused"


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """Ceilings for one ``.gz``/``.bz2``/``.xz`` file (a document, not a disk image)."""

    max_bytes: int = 128 * _MIB
    max_ratio: float = 250.0
    ratio_floor_bytes: int = 4 * _MIB


DEFAULT_STREAM_LIMITS = StreamLimits()
#: Compression formats by suffix: (name shown, magic bytes).
STREAM_FORMATS = {
    ".gz": ("gzip", b"\x1f\x8b"),
    ".bz2": ("bzip2", b"BZh"),
    ".xz": ("xz", b"\xfd7zXZ\x00"),
}


def inflate_stream(
    data: bytes, path: str, suffix: str, limits: StreamLimits = DEFAULT_STREAM_LIMITS
) -> bytes:
    """Decompress a whole ``.gz``/``.bz2``/``.xz`` file in bounded steps.

    Output is produced :data:`_READ` bytes at a time and counted, so a bomb is
    refused as soon as it passes ``max_bytes`` or, past ``ratio_floor_bytes``,
    the ratio limit — before it is ever held in memory. Concatenated members
    (``cat a.gz b.gz``) are read like ``gzip -d`` does.
    """
    name, magic = STREAM_FORMATS[suffix]
    if not data.startswith(magic):
        raise ParseError(path, f"not a {name} file (bad magic bytes)")
    out = bytearray()
    try:
        for piece in _pieces(data, suffix):
            out += piece
            if len(out) > limits.max_bytes:
                raise UnsafeFileError(
                    path,
                    f"{name} content inflates beyond {limits.max_bytes // _MIB} MB: bomb refused",
                )
            ratio = len(out) / max(len(data), 1)
            if len(out) > limits.ratio_floor_bytes and ratio > limits.max_ratio:
                raise UnsafeFileError(
                    path,
                    f"{name} content inflates {ratio:.0f}x (limit {limits.max_ratio:.0f}x): "
                    "bomb refused",
                )
    except (zlib.error, OSError, EOFError, lzma.LZMAError, ValueError) as exc:
        raise ParseError(path, f"corrupt {name} file: {exc}") from None
    return bytes(out)


def _pieces(data: bytes, suffix: str) -> Iterator[bytes]:
    """Decompressed output in steps of at most :data:`_READ` bytes."""
    dec = _decompressor(suffix)
    buf = data
    while True:
        if isinstance(dec, _STREAMED):
            piece = dec.decompress(buf, _READ)
            buf = b""
        else:  # .gz
            piece = dec.decompress(buf, _READ)
            buf = dec.unconsumed_tail
        if piece:
            yield piece
        if dec.eof:
            rest = dec.unused_data
            if not rest.strip(b"\0"):
                return
            dec, buf = _decompressor(suffix), rest  # another member follows
            continue
        stalled = not buf and not piece and (not isinstance(dec, _STREAMED) or dec.needs_input)
        if stalled:
            raise EOFError("truncated: the compressed stream ends early")


def _decompressor(suffix: str) -> _Decompressor:
    if suffix == ".gz":
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if suffix == ".bz2":
        return bz2.BZ2Decompressor()
    return lzma.LZMADecompressor()


def read_member(data: bytes, name: str) -> bytes | None:
    """One member of an archive already checked by :func:`verify_zip` (``None`` if absent)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        try:
            return archive.read(name)
        except KeyError:
            return None


def reject_dtd(text: str | bytes, path: str, what: str) -> None:
    """Refuse XML/HTML that declares entities: they are how expansion bombs work."""
    head = text.encode("utf-8", "replace") if isinstance(text, str) else text
    if re.search(rb"<!\s*ENTITY", head, re.IGNORECASE):
        raise UnsafeFileError(path, f"{what} declares XML entities (<!ENTITY>): refused")


@contextmanager
def guard(path: str, what: str) -> Iterator[None]:
    """Turn any exception from a parsing library into a one-line per-file error."""
    try:
        yield
    except ClawkbError:
        raise
    except RecursionError:
        raise UnsafeFileError(path, f"{what} is nested too deeply to parse") from None
    except MemoryError:
        raise UnsafeFileError(path, f"{what} is too large to parse in memory") from None
    except Exception as exc:  # corrupt input makes libraries fail in any way
        detail = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise ParseError(path, f"corrupt or unsupported {what}: {detail}") from None
