"""Published generations of an on-disk index: manifests, checksums, reader leases.

A writer never changes a file a reader may be using. It builds the next
generation beside the current one (new segment folders, new live-mask
files), then publishes it by atomically replacing ``manifest.json``; a copy
is kept as ``generations/<n>.json`` while any reader still uses it.

Readers hold a *lease* on the generation they search: a small file
``leases/<n>-<pid>-<random>.lease`` that they keep exclusively locked. The
writer, after publishing, lists leases: a lease it can lock is stale (its
reader died) and is removed; the others name generations still in use.
Files referenced by neither the current nor a leased generation are deleted.

Every manifest records each file's size and CRC-32 (generic over the segment
format: whatever files a segment folder holds), the store's identity and the
change sequence the generation was built from (see :mod:`clawkb.index.lexical`).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from clawkb.errors import IndexCorruptError, IndexError_
from clawkb.store.locking import FileLock

MANIFEST = "manifest.json"
GENERATIONS = "generations"
LEASES = "leases"
#: Indexes smaller than this are checksummed in full on every open (a few ms);
#: bigger ones check sizes and headers, and are checksummed in full by
#: `clawkb doctor` and after a writer died (see docs/operations.md).
FULL_CHECK_BYTES = 8 << 20


def crc_file(path: Path) -> tuple[int, int]:
    """(size, CRC-32) of a file, read in 1 MiB blocks."""
    crc = 0
    size = 0
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            crc = zlib.crc32(block, crc)
            size += len(block)
    return size, crc


def replace_atomically(path: Path, write: Callable[[IO[bytes]], object], tmp: Path) -> None:
    """``write`` into ``tmp``, fsync, rename over ``path``; on any failure (a full
    disk) no temporary file is left behind."""
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    replace_atomically(path, lambda fh: fh.write(json.dumps(data).encode()), tmp)


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The current manifest as data; None if there is none. Damage raises one line."""
    path = folder / MANIFEST
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise IndexCorruptError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise IndexCorruptError(f"{path}: not text ({exc.reason})") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise IndexCorruptError(f"{path}: invalid JSON ({exc})") from exc
    if not _well_formed(data):
        raise IndexCorruptError(f"{path}: not an index manifest")
    return data


def _well_formed(data: object) -> bool:
    if not isinstance(data, dict) or not isinstance(data.get("segments"), list):
        return False
    if not all(isinstance(s, str) and "/" not in s and ".." not in s for s in data["segments"]):
        return False
    files = data.get("files", {})
    if not isinstance(files, dict):
        return False
    for rel, entry in files.items():
        if ".." in rel or rel.startswith("/") or not isinstance(entry, list) or len(entry) != 2:
            return False
    ints = ("applied_seq", "next_segment", "generation")
    return all(isinstance(data.get(k, 0), int) for k in ints) and isinstance(
        data.get("live", {}), dict
    )


def manifest_stamp(folder: Path) -> tuple[int, int, int] | None:
    """Cheap change detector for readers: the manifest's (inode, mtime, size)."""
    try:
        st = os.stat(os.path.join(folder, MANIFEST))  # per search: cheaper than Path "/"
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


#: Files this process already checksummed, per index folder, by (name, inode, mtime,
#: size): a long-lived reader moving to a new generation re-reads only new files.
#: Each full check keeps only the files of the manifest it checked, so what a write
#: retired (merged segments, old live masks) is forgotten at the next renewal
#: instead of piling up until a bound (a long-running server's memory stays flat;
#: a file checked again costs one CRC pass). At most :data:`VERIFIED_FOLDERS` folders.
_VERIFIED: dict[str, dict[tuple[str, int, int, int], int]] = {}
VERIFIED_FOLDERS = 64


def verify_files(folder: Path, files: dict[str, list[int]], *, full: bool) -> str | None:
    """Check sizes (and with ``full`` the CRC-32) of the files a manifest names.

    Returns a one-line description of the first problem, or None.
    """
    stats = {}
    base = os.fspath(folder)
    for rel, (size, _) in sorted(files.items()):
        path = os.path.join(base, rel)  # every view renewal checks every file: no Path here
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return f"{rel}: missing"
        if st.st_size != size:
            return f"{rel}: {st.st_size} bytes, the manifest says {size}"
        stats[rel] = (rel, st.st_ino, st.st_mtime_ns, st.st_size)
    if full:
        seen = _VERIFIED.get(base, {})
        kept: dict[tuple[str, int, int, int], int] = {}
        for rel, (_, crc) in sorted(files.items()):
            key = stats[rel]
            if seen.get(key) != crc and crc_file(folder / rel)[1] != crc:
                return f"{rel}: checksum mismatch (the file changed after it was written)"
            kept[key] = crc
        if base not in _VERIFIED and len(_VERIFIED) >= VERIFIED_FOLDERS:
            _VERIFIED.clear()
        _VERIFIED[base] = kept  # one assignment: a reader on another thread sees old or new
    return None


def total_bytes(files: dict[str, list[int]]) -> int:
    return sum(size for size, _ in files.values())


class Lease:
    """A reader's hold on one generation; the writer keeps its files until released."""

    def __init__(self, folder: Path, generation: int) -> None:
        self.generation = generation
        leases = folder / LEASES
        leases.mkdir(exist_ok=True)
        token = f"{os.getpid()}-{secrets.token_hex(4)}"
        # Lock under a temporary name, then rename: the writer only judges
        # leases by their final name, so it never sees one before it is locked.
        tmp = leases / f".tmp-{token}"
        self._lock = FileLock(tmp)
        if not self._lock.try_acquire():  # pragma: no cover - a fresh name
            raise IndexError_(f"{tmp}: cannot lock a new lease file")
        self.path = leases / f"{generation}-{token}.lease"
        try:
            os.replace(tmp, self.path)
        except FileNotFoundError:
            # A writer cleaning stale files removed it before we locked; retry.
            self._lock.release()
            raise
        self._lock.path = self.path

    def __del__(self) -> None:  # a reader dropped without close(): free its generation
        with contextlib.suppress(Exception):
            self.release()

    def release(self) -> None:
        if self._lock.held:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            self._lock.release()


def held_generations(folder: Path) -> set[int]:
    """Generations some live reader holds; stale leases (dead readers) are removed."""
    held: set[int] = set()
    leases = folder / LEASES
    if not leases.is_dir():
        return held
    for entry in leases.iterdir():
        name = entry.name
        probe = FileLock(entry)
        if not probe.try_acquire():
            if name.endswith(".lease"):
                with contextlib.suppress(ValueError):
                    held.add(int(name.split("-", 1)[0]))
            continue
        try:
            entry.unlink(missing_ok=True)
        finally:
            probe.release()
    return held


def save_generation(folder: Path, data: dict[str, Any]) -> None:
    """Publish ``data`` as the current generation (history copy first, then the pointer)."""
    gens = folder / GENERATIONS
    gens.mkdir(exist_ok=True)
    write_json_atomic(gens / f"{int(data['generation']):08d}.json", data)
    write_json_atomic(folder / MANIFEST, data)


def retained_generations(folder: Path, current: int, held: set[int]) -> list[dict[str, Any]]:
    """Manifests of older generations still leased; the rest of the history is deleted."""
    out: list[dict[str, Any]] = []
    gens = folder / GENERATIONS
    if not gens.is_dir():
        return out
    for entry in gens.iterdir():
        try:
            n = int(entry.name.split(".", 1)[0])
        except ValueError:
            entry.unlink(missing_ok=True)  # a leftover temporary file
            continue
        if n == current:
            continue
        if n in held:
            try:
                out.append(json.loads(entry.read_text()))
                continue
            except (OSError, ValueError):
                pass
        entry.unlink(missing_ok=True)
    return out


def referenced(manifests: Iterable[dict[str, Any]]) -> tuple[set[str], set[str]]:
    """(segment folder names, 'segment/file' paths) the given manifests use."""
    segs: set[str] = set()
    files: set[str] = set()
    for m in manifests:
        segs.update(m.get("segments", []))
        files.update(m.get("files", {}).keys())
        for seg, live in (m.get("live") or {}).items():
            if live:
                files.add(f"{seg}/{live}")
    return segs, files
