"""Search the stored chunk vectors: exact (numpy) below a size, HNSW above it.

The store is the truth; this module keeps a derived copy of one model's
vectors as ``.npy`` files under ``index/dense/`` stamped with the store's
change sequence and vector version, rebuilt when the stamp no longer matches.
Exact search is one matrix-vector product with BLAS pinned to one thread
(multi-threaded matvec measured far slower on these machines). Above
``ann_threshold`` vectors an hnswlib graph answers instead; its recall@10
against exact search, measured on the KB's own vectors when it is built, is
kept next to it and shown by ``clawkb status``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from clawkb.errors import DenseDamaged, MissingDependencyError
from clawkb.index import npyfile
from clawkb.index.generations import VERIFIED_FOLDERS
from clawkb.store import vectors_repo
from clawkb.store.locking import FileLock
from clawkb.store.memo import commit_stamp
from clawkb.store.repo import Repository
from clawkb.store.vectors_repo import data_version, model_key

if TYPE_CHECKING:
    import types

    import hnswlib
    from threadpoolctl import ThreadpoolController

#: Above this many vectors an ANN graph answers unfiltered queries.
ANN_THRESHOLD = 50_000
#: Queries sampled from the KB's own vectors to measure ANN recall@10.
RECALL_SAMPLE = 200

_CONTROLLER: ThreadpoolController | None = None
#: Up to this many matrix entries (~2,700 vectors of 384) exact search skips BLAS.
SMALL_EXACT = 1 << 20


def _blas_one_thread() -> contextlib.AbstractContextManager[object]:
    """A context pinning BLAS to one thread (the controller is built once per process)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # still correct, only slower on machines where BLAS threads hurt
            return contextlib.nullcontext()
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=1, user_api="blas")


def exact_top(mat: np.ndarray, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Row positions and scores of the ``k`` best inner products, best first."""
    if len(mat) == 0 or k <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    if mat.size <= SMALL_EXACT:
        # numpy's own loop, no BLAS: as fast at this size, and a fresh process
        # skips loading threadpoolctl (a cold ``clawkb search`` on a small KB)
        scores = np.einsum("ij,j->i", mat, q)
    else:
        with _blas_one_thread():
            scores = mat @ q
    return _best_of(scores, k)


def exact_top_many(mat: np.ndarray, qs: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`exact_top` for each row of ``qs``, the matrix read once for all of them."""
    if len(qs) == 1 or len(mat) == 0 or k <= 0:
        return [exact_top(mat, q, k) for q in qs]
    if mat.size <= SMALL_EXACT:
        return [exact_top(mat, q, k) for q in qs]  # no BLAS: one pass each is as cheap
    with _blas_one_thread():
        scores = mat @ np.ascontiguousarray(qs.T)
    return [_best_of(np.ascontiguousarray(scores[:, j]), k) for j in range(len(qs))]


def _best_of(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    k = min(k, len(scores))
    part = np.argpartition(-scores, k - 1)[:k]
    order = part[np.argsort(-scores[part], kind="stable")]
    return order.astype(np.int64), scores[order]


#: Held while this process rebuilds a search copy (see :meth:`DenseIndex.refresh`).
_REBUILDING = threading.Lock()
#: How long a process waits for another one's rebuild of the same copy (an HNSW
#: graph of a large KB takes a while); past it, it goes on without the lock.
CACHE_LOCK_WAIT = 300.0
#: Waiting for that lock: the first pause and the longest one (a short backoff; a
#: search that meets another process's brief update is not held for 50-ms steps).
LOCK_FIRST_POLL, LOCK_POLL = 0.001, 0.01


@contextlib.contextmanager
def _cache_lock(folder: Path) -> Iterator[None]:
    """The search copy in ``folder`` to this thread alone, across processes too.

    Every process that serves searches keeps the copy up to date (``serve
    --workers``, a terminal ``search`` beside ``serve``): without this, two of
    them could replace its files in turn, leaving one's ``ids.npy`` beside the
    other's ``meta.json``, and a reader could read one version's ``meta.json``
    and the next one's vectors. A folder where no lock file can be made (a
    read-only KB) is read without one, as before."""
    with _REBUILDING:
        lock = FileLock(folder / ".lock")
        try:
            folder.mkdir(parents=True, exist_ok=True)
            held = lock.acquire(CACHE_LOCK_WAIT, poll=LOCK_POLL, first_poll=LOCK_FIRST_POLL)
        except OSError:
            held = False
        try:
            yield
        finally:
            if held:
                lock.release()


class DenseIndex:
    """One model's vectors for search, loaded lazily and cached on disk."""

    def __init__(
        self,
        folder: Path,
        conn: sqlite3.Connection,
        signature: dict[str, Any],
        *,
        ann_threshold: int = ANN_THRESHOLD,
        ann_m: int = 16,
        ann_ef: int = 96,
    ) -> None:
        self.mkey = model_key(signature)
        self.signature = signature
        tag = hashlib.blake2b(self.mkey.encode(), digest_size=6).hexdigest()
        self.folder = folder / tag
        self.conn = conn
        self.ann_threshold = ann_threshold
        self.ann_m, self.ann_ef = ann_m, ann_ef
        self.ids = np.zeros(0, np.int64)
        self.mat = np.zeros((0, int(signature["dim"])), np.float32)
        self.meta: dict[str, Any] = {}
        self._ann: hnswlib.Index | None = None
        self._stamp: list[int] | None = None
        self._quick: tuple[int, int] | None = None

    def stamp(self) -> list[int]:
        return [Repository(self.conn).max_seq(), data_version(self.conn)]

    def refresh(self) -> None:
        """Make the in-memory copy match the store (cheap when nothing changed).

        Raises :class:`DenseDamaged` (one line naming the file) when a vector
        file does not match the size and checksum its ``meta.json`` recorded.
        """
        # one pragma when nothing was committed since the last call (any commit, by
        # this connection or another, moves it); else the store's own stamp decides
        quick = commit_stamp(self.conn)
        if quick == self._quick:
            return
        stamp = self.stamp()
        if stamp == self._stamp:
            self._quick = quick
            return
        if self._adopt(_shared_copy(self.folder, stamp), stamp, quick):
            return  # another view of this process loaded it for this data state
        meta = _read_meta(self.folder / "meta.json")
        if not self._outdated(meta, stamp):
            try:
                self._load(meta, stamp, quick)
                return
            except DenseDamaged:
                pass  # maybe another process was replacing the files: again, under its lock
        elif self._same_vectors(meta, stamp, quick):
            return  # a commit that changed no vector: the copy stands, nothing rewritten
        # Readers that see new vectors together (a server's views after a write, the
        # workers of ``serve --workers``) rebuild the copy once, not once each.
        with _cache_lock(self.folder):
            stamp = self.stamp()
            meta = _read_meta(self.folder / "meta.json")
            if self._outdated(meta, stamp):
                meta = self._update(stamp, meta)
            self._load(meta, stamp, quick)

    def _adopt(self, copy: _Copy | None, stamp: list[int], quick: tuple[int, int]) -> bool:
        """Take ``copy`` (loaded by this process) as this view's copy at ``stamp`` when
        it suits this index and its files are still the ones it was loaded from."""
        if copy is None or copy.meta.get("ann_threshold") != self.ann_threshold:
            return False
        if not copy.files_unchanged(self.folder):
            return False
        self.ids, self.mat, self.meta = copy.ids, copy.mat, copy.meta
        self._ann = None
        self._stamp = stamp
        self._quick = quick
        return True

    def _same_vectors(self, meta: dict[str, Any], stamp: list[int], quick: tuple[int, int]) -> bool:
        """The store moved on (``stamp``) but its live vectors are the ones the copy on
        disk holds: take that copy for ``stamp`` without rewriting anything (no lock).
        What :meth:`_update` decides before it rewrites ``meta.json`` with the new
        stamp only: same model, epoch and threshold, no ANN graph, same chunk ids."""
        if (
            meta.get("model") != self.mkey
            or meta.get("ann") is not None
            or meta.get("ann_threshold") != self.ann_threshold
            or "files" not in meta
            or not isinstance(meta.get("stamp"), list)
            or meta.get("epoch") != vectors_repo.epoch(self.conn)
        ):
            return False
        copy = _shared_copy(self.folder, meta["stamp"])
        if copy is None or copy.meta != meta or not copy.files_unchanged(self.folder):
            try:
                copy = self._read_copy(meta)
            except DenseDamaged:
                return False  # the locked path reads it again or rebuilds it
        live = np.asarray(vectors_repo.linked_ids(self.conn, self.mkey), np.int64)
        if not np.array_equal(live, copy.ids):
            return False
        _share_copy(self.folder, meta["stamp"], copy)
        _share_copy(self.folder, stamp, copy)
        return self._adopt(copy, stamp, quick)

    def _read_copy(self, meta: dict[str, Any]) -> _Copy:
        """The files ``meta`` describes (size and checksum checked), read."""
        problem = verify(self.folder, meta)
        if problem is not None:
            raise DenseDamaged(problem)
        try:
            files = _identities(self.folder, meta)
            ids = npyfile.load(self.folder / "ids.npy")
            mat = npyfile.load(self.folder / "vecs.npy", mmap=True)
        except (OSError, ValueError) as exc:
            raise DenseDamaged(f"unreadable dense vectors ({exc})") from None
        if mat.ndim != 2 or len(mat) != len(ids):
            raise DenseDamaged(f"{self.folder}: ids and vectors disagree in length")
        return _Copy(ids, mat, meta, files)

    def _load(self, meta: dict[str, Any], stamp: list[int], quick: tuple[int, int]) -> None:
        """Take the files ``meta`` describes (size and checksum checked) as the copy."""
        copy = self._read_copy(meta)
        _share_copy(self.folder, stamp, copy)
        self.ids, self.mat, self.meta = copy.ids, copy.mat, copy.meta
        self._ann = None
        self._stamp = stamp
        self._quick = quick

    def _outdated(self, meta: dict[str, Any], stamp: list[int]) -> bool:
        return (
            meta.get("stamp") != stamp
            or meta.get("ann_threshold") != self.ann_threshold
            or "files" not in meta  # written before files were checksummed
        )

    def _update(self, stamp: list[int], old: dict[str, Any]) -> dict[str, Any]:
        """Bring the copy up to ``stamp`` from the old one where it can be trusted: rows
        of deleted chunks dropped, only the vectors added since read from the store,
        and just ``meta.json`` rewritten when no vector changed (most writes). In full
        from the store when the old copy is of another model or epoch, fails its
        size and checksum, or when an ANN graph is (or becomes) part of it."""
        epoch = vectors_repo.epoch(self.conn)
        dim = int(self.signature["dim"])
        if (
            old.get("model") != self.mkey
            or old.get("epoch") != epoch
            or old.get("ann") is not None
            or old.get("ann_threshold") != self.ann_threshold
            or "files" not in old
            or verify(self.folder, old) is not None
        ):
            return self._rebuild(stamp)
        try:
            old_ids = npyfile.load(self.folder / "ids.npy")
            old_mat = npyfile.load(self.folder / "vecs.npy", mmap=True)
        except (OSError, ValueError):
            return self._rebuild(stamp)
        if old_mat.ndim != 2 or old_mat.shape != (len(old_ids), dim):
            return self._rebuild(stamp)
        live = np.asarray(vectors_repo.linked_ids(self.conn, self.mkey), np.int64)
        if len(live) >= self.ann_threshold:
            return self._rebuild(stamp)
        keep = np.isin(old_ids, live)
        new_ids = np.setdiff1d(live, old_ids)
        if keep.all() and not len(new_ids):  # the same vectors: a new stamp only
            meta = {**old, "stamp": stamp}
            _write_meta(self.folder, meta)
            return meta
        rows = dict(vectors_repo.vectors_of(self.conn, self.mkey, new_ids.tolist()))
        new_ids = np.asarray([i for i in new_ids.tolist() if i in rows], np.int64)
        added = np.frombuffer(b"".join(rows[i] for i in new_ids.tolist()), "<f4")
        ids = np.concatenate([old_ids[keep], new_ids])
        mat = np.concatenate([np.asarray(old_mat[keep]), added.reshape(len(new_ids), dim)])
        if len(ids) > 1 and not bool(np.all(ids[1:] > ids[:-1])):  # ids are kept sorted
            order = np.argsort(ids, kind="stable")
            ids, mat = ids[order], mat[order]
        return self._write(stamp, ids, mat, epoch, incremental=True)

    def _rebuild(self, stamp: list[int]) -> dict[str, Any]:
        """The copy in full from the store's vectors."""
        epoch = vectors_repo.epoch(self.conn)
        rows = vectors_repo.matrix_rows(self.conn, self.mkey)
        dim = int(self.signature["dim"])
        ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        mat = np.frombuffer(b"".join(r[1] for r in rows), "<f4").reshape(len(rows), dim)
        return self._write(stamp, ids, mat, epoch, incremental=False)

    def _write(
        self, stamp: list[int], ids: np.ndarray, mat: np.ndarray, epoch: int, *, incremental: bool
    ) -> dict[str, Any]:
        self.folder.mkdir(parents=True, exist_ok=True)
        meta: dict[str, Any] = {
            "stamp": stamp,
            "model": self.mkey,
            "epoch": epoch,
            "count": len(ids),
            "ann_threshold": self.ann_threshold,
            "ann": None,
            "built": "incremental" if incremental else "full",
        }
        with tempfile.TemporaryDirectory(dir=self.folder, prefix=".build-") as tmp:
            np.save(Path(tmp) / "ids.npy", ids)
            np.save(Path(tmp) / "vecs.npy", mat)
            if len(ids) >= self.ann_threshold:
                meta["ann"] = self._build_ann(mat, Path(tmp) / "ann.bin")
            meta["files"] = {
                name: _fingerprint(Path(tmp) / name)
                for name in ("ids.npy", "vecs.npy", "ann.bin")
                if (Path(tmp) / name).exists()
            }
            (Path(tmp) / "meta.json").write_text(json.dumps(meta))
            for name in ("ids.npy", "vecs.npy", "ann.bin", "meta.json"):  # meta last
                if (Path(tmp) / name).exists():
                    os.replace(Path(tmp) / name, self.folder / name)
        kept = set()
        for name, want in meta["files"].items():  # just checksummed: not again on load
            with contextlib.suppress(OSError):
                st = (self.folder / name).stat()
                if st.st_size == want["bytes"]:
                    kept.add((name, st.st_ino, st.st_mtime_ns, st.st_size))
        _remember(self.folder, kept)
        return meta

    def _build_ann(self, mat: np.ndarray, path: Path) -> dict[str, Any]:
        hnswlib = _hnswlib()
        index = hnswlib.Index(space="ip", dim=mat.shape[1])
        index.init_index(max_elements=len(mat), ef_construction=200, M=self.ann_m, random_seed=1)
        index.set_num_threads(1)
        index.add_items(mat, np.arange(len(mat)))
        index.set_ef(self.ann_ef)
        index.save_index(str(path))
        return {
            "kind": "hnsw",
            "M": self.ann_m,
            "ef": self.ann_ef,
            "recall@10": round(_recall_at_10(index, mat), 4),
        }

    def warm(self) -> None:
        """Load the vectors and, when used, the HNSW graph (start-up cost, not query time)."""
        self.refresh()
        if self.uses_ann:
            self._ann_index()

    @property
    def uses_ann(self) -> bool:
        return bool(self.meta.get("ann"))

    def _ann_index(self) -> hnswlib.Index:
        if self._ann is None:
            hnswlib = _hnswlib()
            index = hnswlib.Index(space="ip", dim=self.mat.shape[1])
            index.load_index(str(self.folder / "ann.bin"), max_elements=len(self.mat))
            index.set_num_threads(1)
            index.set_ef(self.ann_ef)
            self._ann = index
        return self._ann

    def search(
        self, q: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` chunk ids and cosine scores; ``allowed`` restricts the candidates."""
        return self.search_many(np.asarray(q, np.float32)[None, :], k, allowed)[0]

    def search_many(
        self, qs: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`search` for each row of ``qs`` (a query and its translation) in one call."""
        self.refresh()
        qs = np.asarray(qs, np.float32)
        if allowed is not None:
            pos = np.flatnonzero(np.isin(self.ids, allowed))
            sub = np.asarray(self.mat[pos])
            return [(self.ids[pos[top]], sc) for top, sc in exact_top_many(sub, qs, k)]
        if self.uses_ann and len(self.ids) > k:
            labels, dist = self._ann_index().knn_query(qs, k=min(k, len(self.ids)))
            return [
                (self.ids[row.astype(np.int64)], (1.0 - d).astype(np.float32))
                for row, d in zip(labels, dist, strict=True)
            ]
        return [(self.ids[top], sc) for top, sc in exact_top_many(self.mat, qs, k)]

    def has(self, ids: np.ndarray) -> np.ndarray:
        """Which of ``ids`` have a vector here (the ids are kept sorted: a binary search)."""
        self.refresh()
        if not len(self.ids):
            return np.zeros(len(ids), bool)
        pos = np.minimum(np.searchsorted(self.ids, ids), len(self.ids) - 1)
        return np.asarray(self.ids[pos] == ids)

    def status(self) -> dict[str, Any]:
        self.refresh()
        return {
            "model": self.mkey,
            "vectors": len(self.ids),
            "search": "hnsw" if self.uses_ann else "exact",
            "ann_threshold": self.ann_threshold,
            "ann": self.meta.get("ann"),
        }


class _Copy:
    """A search copy as one process loaded it: its arrays, its ``meta.json`` and the
    identity (inode, mtime, size) of the files they came from. Read-only once made."""

    __slots__ = ("files", "ids", "mat", "meta")

    def __init__(
        self, ids: np.ndarray, mat: np.ndarray, meta: dict[str, Any], files: tuple[Any, ...]
    ) -> None:
        self.ids, self.mat, self.meta, self.files = ids, mat, meta, files

    def files_unchanged(self, folder: Path) -> bool:
        """The files are still the ones read (not replaced, not removed by a repair)."""
        try:
            return _identities(folder, self.meta) == self.files
        except OSError:
            return False


def _identities(folder: Path, meta: dict[str, Any]) -> tuple[Any, ...]:
    out = []
    for name in sorted(dict(meta.get("files") or {})):
        st = os.stat(folder / name)
        out.append((name, st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(out)


#: Per folder, the copies this process loaded by the store stamp they serve (the
#: newest few): a server's reader views, one per thread, each renewed after every
#: write, share one copy per data state instead of loading it once each. Keyed by
#: the stamp a view reads on its own snapshot, so a view pinned to an older one
#: never takes a newer copy.
_SHARED_COPIES = 4
_copies: dict[str, OrderedDict[tuple[int, ...], _Copy]] = {}
_copies_lock = threading.Lock()


def _shared_copy(folder: Path, stamp: list[int]) -> _Copy | None:
    with _copies_lock:
        per = _copies.get(str(folder))
        return None if per is None else per.get(tuple(stamp))


def _share_copy(folder: Path, stamp: list[int], copy: _Copy) -> None:
    with _copies_lock:
        if str(folder) not in _copies and len(_copies) >= VERIFIED_FOLDERS:
            _copies.clear()
        per = _copies.setdefault(str(folder), OrderedDict())
        per[tuple(stamp)] = copy
        per.move_to_end(tuple(stamp))
        while len(per) > _SHARED_COPIES:
            per.popitem(last=False)


#: Per folder, (name, inode, mtime, size) of the files whose checksum matched: checked
#: once per version. A server rewrites the vector files after each write that adds
#: vectors; each check keeps only the files its ``meta`` names, so replaced versions
#: are forgotten (at most :data:`~clawkb.index.generations.VERIFIED_FOLDERS` folders).
_verified: dict[str, set[tuple[str, int, int, int]]] = {}


def _remember(folder: Path, kept: set[tuple[str, int, int, int]]) -> None:
    """``kept``: the files of ``folder`` now known sound (those of older versions go)."""
    if str(folder) not in _verified and len(_verified) >= VERIFIED_FOLDERS:
        _verified.clear()
    _verified[str(folder)] = kept


def _fingerprint(path: Path) -> dict[str, Any]:
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return {"bytes": path.stat().st_size, "blake2b": digest.hexdigest()}


def _write_meta(folder: Path, meta: dict[str, Any]) -> None:
    """Replace ``meta.json`` at once (a reader sees the old one or the new one)."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".meta-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(meta))
        os.replace(tmp, folder / "meta.json")
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _read_meta(path: Path) -> dict[str, Any]:
    """The cache's manifest; an unreadable one counts as missing (the cache is rebuilt)."""
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def verify(folder: Path, meta: dict[str, Any]) -> str | None:
    """Why a vector file in ``folder`` is not the one ``meta`` describes, or None."""
    seen = _verified.get(str(folder), set())
    kept: set[tuple[str, int, int, int]] = set()
    for name, want in sorted(dict(meta.get("files") or {}).items()):
        path = folder / name
        try:
            st = path.stat()
        except OSError:
            return f"{path}: missing (the dense vector cache is damaged)"
        key = (name, st.st_ino, st.st_mtime_ns, st.st_size)
        kept.add(key)
        if key in seen:
            continue
        if st.st_size != want.get("bytes"):
            return (
                f"{path}: {st.st_size} bytes, the manifest says {want.get('bytes')}"
                " (damaged dense vectors)"
            )
        if _fingerprint(path)["blake2b"] != want.get("blake2b"):
            return f"{path}: checksum mismatch (damaged dense vectors)"
    _remember(folder, kept)
    return None


def cache_folder(home: Path, signature: dict[str, Any]) -> Path:
    """Where :class:`DenseIndex` keeps the vectors of ``signature`` under ``home``."""
    tag = hashlib.blake2b(model_key(signature).encode(), digest_size=6).hexdigest()
    return home / "index" / "dense" / tag


def _hnswlib() -> types.ModuleType:
    try:
        import hnswlib
    except ImportError:
        raise MissingDependencyError("the ANN vector index", "dense") from None
    return hnswlib


def _recall_at_10(index: hnswlib.Index, mat: np.ndarray) -> float:
    """Mean overlap of ANN and exact top-10 for a fixed sample of the KB's own vectors."""
    rng = np.random.default_rng(0)
    sample = rng.choice(len(mat), size=min(RECALL_SAMPLE, len(mat)), replace=False)
    k = min(10, len(mat))
    labels, _ = index.knn_query(mat[sample], k=k)
    hits = 0
    for row, qi in enumerate(sample):
        exact, _ = exact_top(mat, mat[qi], k)
        hits += len(set(exact.tolist()) & set(labels[row].tolist()))
    return hits / (k * len(sample))
