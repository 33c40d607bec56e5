"""The persistent, incremental BM25F index (ARCHITECTURE.md, `index/`).

Layout under the KB folder (``index/lexical/``)::

    manifest.json     the current generation: segments, their live masks,
                      size + CRC-32 of every file, applied store change
                      sequence, store id
    generations/      copies of generations some reader still leases
    leases/           one locked file per reader and generation
    seg-000001/ ...   immutable segments (see :mod:`clawkb.index.segment`)
                      plus ``live-<generation>.npy`` masks

Adds create a new small segment; deletes write a new live mask for the next
generation; a tiered policy merges segments of similar size. Nothing a
published generation names is ever modified: the next generation is built
beside it and published by replacing the manifest atomically (see
:mod:`clawkb.index.generations`), so readers see one whole generation and a
crash leaves either the old or the new one. ``clawkb.ingest.sync`` replays
the store's change log from the last applied sequence.
"""

from __future__ import annotations

import math
import re
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clawkb.errors import IndexError_
from clawkb.index import generations as gens
from clawkb.index import npyfile
from clawkb.index.blocks import BLOCK
from clawkb.index.scorer import (
    BLOCKMAX_AVAILABLE,
    member_cache,
    score_topk,
    score_topk_blockmax,
    score_topk_pruned,
    search_segments,
)
from clawkb.index.segment import (
    FIELDS,
    N_FIELDS,
    DocFields,
    DocTexts,
    Segment,
    build_arrays,
    hash_terms,
    merge_segments,
    write_segment,
)
from clawkb.index.segment import damaged_segment as _damaged
from clawkb.index.segment import reading_segment as _reading

ENGINE = "clawkb-bm25f-segments/4"  # /2: FNV-1a + splitmix64 hashes; /3: block bounds;
# /4: bit-packed postings (segment format 4)
MANIFEST_NAME = gens.MANIFEST
#: The rule that splits a chunk into BM25F fields (clawkb.ingest.sync.doc_fields);
#: a KB whose index was built under another one is rebuilt from the store.
#: 1: the document title and the heading path, once each. (A rule that wrote a
#: chunk's own heading twice with title weight 4 / b 0.9 lifted esp-idf section
#: titles from 72 % to 96 % but lifted heading words over answers on the examples'
#: questions; it was not kept: bench/results/formats-latest.md.)
LEXICAL_FIELDS_VERSION = "1"


def _save_array(path: Path, arr: np.ndarray) -> None:
    gens.replace_atomically(path, lambda fh: np.save(fh, arr), path.with_name(path.name + ".tmp"))


@dataclass(frozen=True, slots=True)
class BM25FParams:
    """Ranking parameters. Field order: title (heading path), body, code."""

    k1: float = 1.2
    weights: tuple[float, float, float] = (2.0, 1.0, 0.6)
    b: tuple[float, float, float] = (0.3, 0.75, 0.75)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BM25FParams:
        return cls(k1=float(d["k1"]), weights=tuple(d["weights"]), b=tuple(d["b"]))


@dataclass
class _Manifest:
    segments: list[str] = field(default_factory=list)
    applied_seq: int = 0
    next_segment: int = 1
    engine: str = ENGINE
    #: bumped by every publish; readers lease the generation they search
    generation: int = 0
    #: the store this index was built from (``meta.store_id``)
    store_id: str = ""
    #: segment -> its live-mask file for this generation ("" = every doc live)
    live: dict[str, str] = field(default_factory=dict)
    #: "segment/file" -> [size, CRC-32] of every file this generation reads
    files: dict[str, list[int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """``dataclasses.asdict`` without its deep recursion (every publish writes the
        manifest, whose ``files`` has a dozen entries a segment)."""
        return {
            "segments": list(self.segments),
            "applied_seq": self.applied_seq,
            "next_segment": self.next_segment,
            "engine": self.engine,
            "generation": self.generation,
            "store_id": self.store_id,
            "live": dict(self.live),
            "files": {k: list(v) for k, v in self.files.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> _Manifest:
        known = {f: data[f] for f in cls.__dataclass_fields__ if f in data}
        return cls(**known)


_SEG_NAME = re.compile(r"seg-\d+")

#: What the kernel caches per block the first time it bounds it (valid until the
#: next write, which changes the average lengths). True: the block's exact bound
#: (its best doc's BM25F pseudo-frequency, which decodes the block). Off: measured
#: in one `bench/run_all.py` pass of 1,020 distinct queries at 100k docs, filling
#: that cache cost more than it saved (p50 0.478 ms on vs 0.353 ms off, same run).
#: False: the cheap bound from the block's max tf and min lengths, which the
#: kernel otherwise recomputed for every block of every query term (issue 24).
EXACT_BLOCK_BOUNDS = False

#: Per-posting impact bytes (``_blockmax.c``: a posting's BM25F saturation in
#: 255ths, rounded up), filled by the kernel a block at a time the first time a
#: query adds the block up and kept until the next write: later queries add one
#: byte per posting (an upper bound for pruning; survivors are scored exactly,
#: so results are identical) instead of three frequencies, a random load of
#: the doc's length factors and a division. Memory: one byte per posting of the
#: blocks queries touched (zeroed pages cost nothing until then). Off by default:
#: queries touch scattered blocks of long lists, so most of a large index's
#: pages get dirtied (at 0.77M docs: 183 vs 54 MB anonymous, peak 566 vs 437 MB)
#: for no measurable CPU saving (3.69/3.49 vs 3.31/3.49 ms a query, identical
#: top-k; bench/results/lexical-build-s9.md).
IMPACTS = False

#: Membership bitmaps (``_blockmax.c``) for posting lists holding at least one
#: doc in MEMBER_DENSITY: a candidate's membership in such a list is one bit
#: test and its posting is found by rank, instead of a seek through the list's
#: blocks. Segments of format 6 store them (written with the segment, by the
#: same rule: ``segment.MEMBER_DENSITY``); for older segments the kernel builds
#: them the first time a query has such a term, kept until the next write,
#: 1.5 bits per doc of the segment each, at most MEMBER_BUDGET times the
#: segment's packed postings in all. Results are identical with or without
#: them (0 turns them off, stored ones included).
MEMBER_DENSITY = 32
MEMBER_BUDGET = 0.25


def _member_cache(seg: Segment) -> object | None:
    """The segment's membership-bitmap cache (its stored bitmaps, if any, the
    kernel fills the rest), or None."""
    if not MEMBER_DENSITY:
        return None
    budget = int(len(seg.packed["packed"]) * MEMBER_BUDGET)
    return member_cache(len(seg.chunk_ids), budget, MEMBER_DENSITY, seg.members)


def _impact_cache(seg: Segment) -> tuple[np.ndarray, np.ndarray]:
    """Zeroed impact bytes (one per posting) and their per-block flags for the
    kernel to fill; a damaged dictionary's posting count is clamped to what the
    blocks can hold (the kernel uses impacts only for postings inside them)."""
    n_blocks = len(seg.packed["blk_last"])
    try:
        n = seg.n_postings
    except (IndexError, ValueError):
        n = 0
    return np.zeros(max(0, min(n, n_blocks * BLOCK)), np.uint8), np.zeros(n_blocks, np.uint8)


class LexicalIndex:
    """BM25F over segments; one writer at a time (the caller holds the KB lock).

    A reader (``writable=False``) holds a lease on the generation it loaded
    until :meth:`close`; :meth:`is_stale` tells it a newer one was published.
    A damaged index (missing, truncated or changed file, bad manifest) opens
    empty with ``damaged`` set to a one-line reason and ``applied_seq`` -1,
    so the next sync rebuilds it from the store.
    """

    #: Tiered merging: segments whose live doc counts share a power of MERGE_FACTOR
    #: form a tier; MERGE_FACTOR segments of one tier are merged.
    MERGE_FACTOR = 8
    #: Segments of at least BIG_DOCS docs (an ingest batch's worth) use tiers of
    #: BIG_MERGE_FACTOR instead: a query pays per segment (term lookups, block
    #: bounds, windows), and at 100k docs four 20k-doc worker segments become one
    #: (bench/README.md, issue 24). Once the index has such a segment, all smaller
    #: ones form one tail tier, also merged four at a time, so a large index does
    #: not keep a trail of small segments; an index without one keeps factor 8.
    BIG_DOCS = 16_384
    BIG_MERGE_FACTOR = 4
    #: The floor tier (an index without a BIG_DOCS segment; with one, the tail
    #: tier above plays its part): segments under FLOOR_DOCS live docs (small writes: a few
    #: files rewritten through the API, a memory) form one tier, merged once
    #: FLOOR_MERGE_FACTOR of them exist, instead of one tier per power of
    #: MERGE_FACTOR (up to seven each of 1-7, 8-63 and 64-511 docs). Every
    #: segment a query walks costs it Python work in several stages (term
    #: lookups, the exact stage, the not-found judge), so steady small writes
    #: must not leave a trail of tiny segments; a floor merge rewrites the
    #: FLOOR_MERGE_FACTOR smallest (so under FLOOR_MERGE_FACTOR x FLOOR_DOCS
    #: docs), never a segment over the floor
    #: (bench/results/serve-cpu.md, "Small writes and segments").
    FLOOR_DOCS = 256
    FLOOR_MERGE_FACTOR = 4
    #: The largest merge a write (:meth:`apply`) may start: the merge policy runs on
    #: the writer's path, so a small batch never waits for a big merge.
    MAX_MERGED_DOCS = 250_000
    #: Consolidation: a query pays per segment (at 1M docs one segment took 4-12 %
    #: less CPU a query than the eight of the capped policy, bench/results/lexical-s10.md
    #: and lexical-s11.md), so a bulk write ends by merging the index into as few
    #: segments of at most CONSOLIDATE_MAX_DOCS as it can (:meth:`consolidate`):
    #: a rebuild, and an indexing run that wrote at least CONSOLIDATE_SHARE of the
    #: docs the merge would rewrite, so the merge costs a bounded share of the time
    #: the run already took (a merge rewrites a doc ~7x faster than ingest inverts it).
    CONSOLIDATE_SHARE = 0.5
    #: Merge memory grows with the output (about its packed postings): the cap on
    #: one consolidated segment. One 1M-doc segment lifted the bench's build peak
    #: from 1,217 to 1,450 MB (over 1.2x tantivy's; bench/results/lexical-s11.md).
    CONSOLIDATE_MAX_DOCS = 500_000
    #: Below this many postings a plain scan is faster than pruning's bookkeeping
    #: (measured: at 100k docs pruning cost +50% p50; it pays on long lists).
    PRUNE_MIN_POSTINGS = 200_000
    #: Segments with at least this many postings for the query use the exact
    #: block-max kernel (when built); shorter ones the plain scan.
    BLOCKMAX_MIN_POSTINGS = 0

    def __init__(
        self,
        folder: Path,
        params: BM25FParams | None = None,
        *,
        writable: bool = False,
        store_id: str = "",
        full_check: bool | None = None,
    ) -> None:
        self.folder = folder
        self.params = params or BM25FParams()
        self.writable = writable
        self.store_id = store_id
        self.damaged: str | None = None
        self.lease: gens.Lease | None = None
        #: the oldest change seq any published generation in use was built at
        self.oldest_seq_in_use = 0
        self._dirty_live: set[str] = set()
        #: docs this writer added so far (:meth:`apply`): a run notes it at its
        #: start and passes the difference to :meth:`consolidate` at its end
        self.docs_written = 0
        self._pending: set[str] = set()  # reserved or staged segment names
        self._staging: list[Segment] | None = None
        self._stamp: tuple[int, int, int] | None = None
        #: the manifest stamp of the generation this writer published and then held
        #: (:meth:`hold_current`): while it is still the current one, the next write
        #: of the same process resumes on these segments (:meth:`resume_writing`)
        self._own_stamp: tuple[int, int, int] | None = None
        folder.mkdir(parents=True, exist_ok=True)
        self._load(full_check)
        if writable and self.damaged is None:
            self._remove_orphans()
        self._stats_cache: tuple[int, np.ndarray] | None = None
        self._factors: dict[str, np.ndarray] = {}
        self._native_args: list[list[Any]] | None = None
        self._native_key: tuple[Segment, ...] = ()
        self._params_cache: tuple[Any, np.ndarray] | None = None
        # (segment, term hash) -> largest BM25F pseudo-frequency x seen: bounds
        # for pruning; valid until lengths/weights change (_invalidate).
        self._max_x: dict[tuple[str, int], float] = {}
        #: term hash -> document frequency over ``_df_key`` (the segments it was
        #: counted on): a query's stages (the lexical channel, the exact stage,
        #: the not-found judge) ask for the same terms' frequencies several
        #: times, each a dictionary lookup in every segment
        self._df_memo: tuple[tuple[Segment, ...], dict[int, int]] = ((), {})
        self.manifest: _Manifest
        self.segments: list[Segment]

    # -- manifest ---------------------------------------------------------
    def _load(self, full_check: bool | None) -> None:
        """Read the manifest (under a lease for readers) and map its segments."""
        for attempt in range(50):
            self._stamp = gens.manifest_stamp(self.folder)
            try:
                data = gens.read_manifest(self.folder)
            except gens.IndexCorruptError as exc:
                self._mark_damaged(str(exc), None)
                return
            self.manifest = _Manifest.from_dict(data) if data else _Manifest()
            if data is not None and not self.writable:
                try:
                    lease: gens.Lease | None = gens.Lease(self.folder, self.manifest.generation)
                except FileNotFoundError:
                    continue
                except OSError:  # a read-only KB folder: no writer can change it anyway
                    lease = None
                if lease is not None:
                    try:
                        again = gens.read_manifest(self.folder)
                    except gens.IndexCorruptError:
                        again = None
                    if again is None or again.get("generation", 0) != self.manifest.generation:
                        lease.release()  # a writer published meanwhile: take the newer one
                        time.sleep(0.001 * attempt)
                        continue
                self.lease = lease
            if self.manifest.engine != ENGINE:
                # Written by another engine version (e.g. other term hashes):
                # unusable as is; applied_seq -1 makes the next sync rebuild it.
                self.manifest = _Manifest(
                    applied_seq=-1,
                    next_segment=self.manifest.next_segment,
                    generation=self.manifest.generation,
                )
            problem = self._open_segments(full_check)
            if problem is not None:
                self._mark_damaged(problem, self.manifest)
            return
        raise IndexError_(f"{self.folder}: the index kept changing while it was opened")

    def _open_segments(self, full_check: bool | None) -> str | None:
        m = self.manifest
        if m.files:
            full = full_check
            if full is None:
                full = gens.total_bytes(m.files) <= gens.FULL_CHECK_BYTES
            problem = gens.verify_files(self.folder, m.files, full=full)
            if problem:
                return f"{self.folder / MANIFEST_NAME}: {problem}"
        segments = []
        contents: dict[str, list[tuple[Any, ...]]] = {}
        if not self.writable:
            Segment.forget_shared(self.folder, m.segments)
            for rel, entry in m.files.items():  # what each segment holds, by size and CRC
                seg_name, _, fname = rel.partition("/")
                if not fname.startswith("live"):
                    contents.setdefault(seg_name, []).append((fname, *entry))
        for name in m.segments:
            try:
                # a reader maps each segment once per process; the writer its own copy
                if self.writable:
                    seg = Segment(self.folder / name)
                else:
                    key = tuple(sorted(contents[name])) if name in contents else None
                    seg = Segment.shared(self.folder / name, key)
                live = m.live.get(name)
                if live:
                    seg.live = npyfile.load(self.folder / name / live)
                elif live == "":
                    seg.live = np.ones(seg.n_docs, np.uint8)
                if len(seg.live) != seg.n_docs:
                    raise ValueError(f"live mask has {len(seg.live)} entries for {seg.n_docs} docs")
            except Exception as exc:  # any damage of a file (a bad .npy header raises
                # ValueError, SyntaxError or tokenize.TokenError, a short file OSError...)
                return f"{self.folder / name}: unreadable segment ({type(exc).__name__}: {exc})"
            segments.append(seg)
        self.segments = segments
        return None

    def _mark_damaged(self, reason: str, manifest: _Manifest | None) -> None:
        self.damaged = reason
        self.segments = []
        numbers = [int(c.name[4:]) for c in self.folder.iterdir() if _SEG_NAME.fullmatch(c.name)]
        gen = manifest.generation if manifest else self._newest_generation()
        self.manifest = _Manifest(
            applied_seq=-1,
            next_segment=max([manifest.next_segment if manifest else 1, *(n + 1 for n in numbers)]),
            generation=gen,
        )

    def _newest_generation(self) -> int:
        folder = self.folder / gens.GENERATIONS
        best = 0
        if folder.is_dir():
            for entry in folder.iterdir():
                head = entry.name.split(".", 1)[0]
                if head.isdigit():
                    best = max(best, int(head))
        return best

    def is_stale(self) -> bool:
        """True when a writer published a newer generation than the one loaded."""
        return gens.manifest_stamp(self.folder) != self._stamp

    def close(self) -> None:
        """Release this reader's lease (the writer may then delete its files) and drop
        the segments, so their mapped files are unmapped now, not at the next GC."""
        if self.lease is not None:
            self.lease.release()
            self.lease = None
        self.segments = []
        self._native_args, self._native_key = None, ()
        self._factors.clear()
        self._df_memo = ((), {})

    def hold_current(self) -> None:
        """A writer turning reader: lease the generation it just published."""
        if self.lease is None and not self.damaged:
            self.lease = gens.Lease(self.folder, self.manifest.generation)
        if self.writable and not self.damaged and self._staging is None and not self._pending:
            self._own_stamp = self._stamp
        self.writable = False

    def resume_writing(self) -> bool:
        """Writable again without mapping every segment afresh, when this index is the
        generation its own writer published and held, and nothing changed since: no
        other process published (the manifest stamp), every file still matches the
        manifest (sizes; CRCs too for a small index, as an open checks them). False:
        open the index afresh. A server writes after every API call; reopening
        mapped each segment's dozen files each time."""
        if (
            self._own_stamp is None
            or self._own_stamp != self._stamp
            or self.damaged
            or self.is_stale()
        ):
            return False
        m = self.manifest
        full = gens.total_bytes(m.files) <= gens.FULL_CHECK_BYTES
        if m.files and gens.verify_files(self.folder, m.files, full=full) is not None:
            return False  # the fresh open reports it
        if self.lease is not None:
            self.lease.release()
            self.lease = None
        self._own_stamp = None
        self.writable = True
        for child in self.folder.iterdir():  # a crashed writer's half-written folders
            if child.is_dir() and child.name.endswith(".tmp"):
                shutil.rmtree(child, ignore_errors=True)
        return True  # (its own publish collected the garbage; the next one will again)

    def _publish(self) -> None:
        """Write changed live masks, checksum new files and publish the next generation."""
        m = self.manifest
        m.generation += 1
        m.segments = [s.name for s in self.segments]
        if self.store_id:
            m.store_id = self.store_id
        for seg in self.segments:
            if seg.name in self._dirty_live or seg.name not in m.live:
                if seg.name in self._dirty_live or not seg.live.all():
                    fname = f"live-{m.generation:08d}.npy"
                    _save_array(seg.folder / fname, seg.live)
                    m.live[seg.name] = fname
                else:
                    m.live[seg.name] = ""
        self._dirty_live.clear()
        names = set(m.segments)
        m.live = {k: v for k, v in m.live.items() if k in names}
        files: dict[str, list[int]] = {}
        for seg in self.segments:
            for entry in seg.folder.iterdir():
                if entry.name.startswith("live") or entry.name.endswith(".tmp"):
                    continue
                rel = f"{seg.name}/{entry.name}"
                files[rel] = m.files.get(rel) or list(gens.crc_file(entry))
            if m.live.get(seg.name):
                rel = f"{seg.name}/{m.live[seg.name]}"
                files[rel] = m.files.get(rel) or list(gens.crc_file(self.folder / rel))
        m.files = files
        gens.save_generation(self.folder, m.to_dict())
        self._stamp = gens.manifest_stamp(self.folder)
        self.damaged = None
        self._collect_garbage()

    def _collect_garbage(self) -> None:
        """Delete segment folders and live masks no generation in use refers to."""
        m = self.manifest
        held = gens.held_generations(self.folder)
        old = gens.retained_generations(self.folder, m.generation, held)
        current = m.to_dict()
        seg_names, files = gens.referenced([current, *old])
        keep = seg_names | self._pending | {s.name for s in self._staging or ()}
        for child in self.folder.iterdir():
            if not child.is_dir() or not _SEG_NAME.fullmatch(child.name):
                continue
            if child.name not in keep:
                shutil.rmtree(child, ignore_errors=True)
                continue
            for f in child.iterdir():
                if f.name.startswith("live-") and f"{child.name}/{f.name}" not in files:
                    f.unlink(missing_ok=True)
        self.oldest_seq_in_use = min([m.applied_seq, *(int(o.get("applied_seq", 0)) for o in old)])

    def _remove_orphans(self) -> None:
        """Writer start: drop half-written folders of a crashed writer, then collect garbage."""
        for child in self.folder.iterdir():
            if child.is_dir() and child.name.endswith(".tmp"):
                shutil.rmtree(child, ignore_errors=True)
        self._collect_garbage()

    @property
    def applied_seq(self) -> int:
        return self.manifest.applied_seq

    @property
    def generation(self) -> int:
        return self.manifest.generation

    # -- writes -----------------------------------------------------------
    def reserve_segments(self, n: int) -> list[Path]:
        """Folder names for segments built elsewhere (e.g. by worker processes)."""
        first = self.manifest.next_segment
        self.manifest.next_segment += n
        names = [f"seg-{first + i:06d}" for i in range(n)]
        self._pending.update(names)
        # Persist at once: a killed run's stray workers must never share a
        # folder name with the next run's segments.
        self._publish()
        return [self.folder / name for name in names]

    def apply(
        self,
        adds: Iterable[DocFields | DocTexts],
        deletes: Sequence[int],
        applied_seq: int,
        prebuilt: Sequence[Path] = (),
    ) -> None:
        """Apply one batch of store changes and publish it with ``applied_seq``.

        ``prebuilt`` names finished segment folders (from :meth:`reserve_segments`)
        to register along with the batch. During a rebuild (:meth:`begin_rebuild`)
        new segments are staged and nothing is published until
        :meth:`finish_rebuild`.
        """
        if deletes:
            if self._staging is not None:
                raise IndexError_("deletes cannot be applied while a rebuild is staged")
            ids = np.unique(np.asarray(deletes, np.int64))
            for seg in self.segments:
                if seg.delete(ids):
                    self._dirty_live.add(seg.name)
        target = self._staging if self._staging is not None else self.segments
        arrays = build_arrays(adds)
        if len(arrays[0]):
            name = f"seg-{self.manifest.next_segment:06d}"
            self.manifest.next_segment += 1
            self._pending.add(name)
            write_segment(self.folder / name, *arrays)
            target.append(Segment(self.folder / name))
            self.docs_written += len(target[-1].chunk_ids)
        for folder in prebuilt:
            seg = Segment(folder)
            if seg.n_docs:
                target.append(seg)
                self.docs_written += seg.n_docs
        if self._staging is not None:
            return
        self.manifest.applied_seq = applied_seq
        self._merge_if_needed()
        self._publish()
        self._pending.clear()
        self._invalidate()

    def begin_rebuild(self) -> None:
        """Start building a whole new index beside the current one (readers keep it)."""
        self._staging = []

    def stage(self, segments: Sequence[Segment]) -> None:
        """Add finished segments (e.g. moved in from a private build) to the staged rebuild."""
        assert self._staging is not None, "begin_rebuild() first"
        for seg in segments:
            self._staging.append(seg)
            self._pending.add(seg.name)
            if not seg.live.all():
                self._dirty_live.add(seg.name)

    def finish_rebuild(self, applied_seq: int) -> None:
        """Publish the staged segments as the index, in one atomic switch: every
        doc was just written, so they are consolidated (:meth:`consolidate`)."""
        staged, self._staging = self._staging or [], None
        self.segments = [s for s in staged if s.n_live > 0]
        self.manifest.applied_seq = applied_seq
        if not self._consolidate_groups(sum(s.n_live for s in self.segments)):
            self._merge_if_needed()
        self._publish()
        self._pending.clear()
        self._invalidate()

    def abort_rebuild(self) -> None:
        """Drop staged segments; the published index stays as it was."""
        staged, self._staging = self._staging or [], None
        for seg in staged:
            shutil.rmtree(seg.folder, ignore_errors=True)
        self._pending.clear()

    def clear(self) -> None:
        """Publish an empty index (``applied_seq`` -1: the next sync rebuilds it)."""
        self.segments = []
        self.manifest.applied_seq = -1
        self._publish()
        self._invalidate()

    def _merge_if_needed(self) -> None:
        """Tiered merging: merge runs of segments whose sizes share a tier.

        A merge never produces more than ``MAX_MERGED_DOCS`` live docs: merge
        memory grows with the output, and a few big segments search as fast
        as one (per-segment overhead is tens of microseconds). Folders of
        dropped segments are deleted once no reader uses them.
        """
        while True:
            self.segments = [s for s in self.segments if s.n_live > 0]
            group = self._merge_candidates()
            if not group:
                return
            self._merge(group)

    def _merge_candidates(self) -> list[Segment]:
        tiers: dict[tuple[int, int], list[Segment]] = {}
        big = any(seg.n_live >= self.BIG_DOCS for seg in self.segments)
        for seg in self.segments:
            if 2 * seg.n_live > self.MAX_MERGED_DOCS:
                continue  # full enough: merging it again would mostly rewrite it
            if seg.n_live >= self.BIG_DOCS:
                factor = self.BIG_MERGE_FACTOR
                tier = (factor, int(math.log(seg.n_live, factor)))
            elif big:  # the tail of a large index: one tier
                factor = self.BIG_MERGE_FACTOR
                tier = (factor, -1)
            elif seg.n_live < min(self.FLOOR_DOCS, self.BIG_DOCS):  # the floor tier
                factor = self.FLOOR_MERGE_FACTOR
                tier = (factor, -2)
            else:
                factor = self.MERGE_FACTOR
                tier = (factor, int(math.log(max(seg.n_live, 1), factor)))
            tiers.setdefault(tier, []).append(seg)
        for (factor, level), group in tiers.items():
            if len(group) < factor:
                continue
            pick: list[Segment] = []
            total = 0
            # smallest first, so the cap on a merge's size still lets a tier merge
            for seg in sorted(group, key=lambda s: s.n_live):
                if total + seg.n_live > self.MAX_MERGED_DOCS:
                    break
                if level == -2 and len(pick) == factor:
                    break  # a floor merge: the smallest FLOOR_MERGE_FACTOR, no more
                pick.append(seg)
                total += seg.n_live
            if len(pick) >= 2:  # merged in index order (chunk order within a segment)
                chosen = set(pick)
                return [seg for seg in self.segments if seg in chosen]
        return []

    def _consolidation(self, written: int) -> list[list[Segment]]:
        """The merges :meth:`consolidate` would run after ``written`` docs: runs
        of adjacent segments (index order) of at most CONSOLIDATE_MAX_DOCS live
        docs together, each of two segments or more (or one with deleted docs),
        kept only while ``written`` stays at least CONSOLIDATE_SHARE of the
        docs they rewrite."""
        runs: list[list[Segment]] = [[]]
        size = 0
        for seg in self.segments:
            if runs[-1] and size + seg.n_live > self.CONSOLIDATE_MAX_DOCS:
                runs.append([])
                size = 0
            runs[-1].append(seg)
            size += seg.n_live
        runs = [r for r in runs if len(r) > 1 or (r and r[0].n_live < r[0].n_docs)]
        cost = sum(s.n_live for r in runs for s in r)
        if not runs or written < self.CONSOLIDATE_SHARE * cost:
            return []
        return runs

    def _consolidate_groups(self, written: int) -> bool:
        runs = self._consolidation(written)
        for run in runs:
            self._merge(run)
        return bool(runs)

    def consolidate(self, written: int) -> bool:
        """End of a bulk write of ``written`` docs: merge the index into the fewest
        segments of at most CONSOLIDATE_MAX_DOCS docs, when those docs are at
        least CONSOLIDATE_SHARE of what the merges rewrite (else nothing: a small
        run never pays for a big merge). Publishes; True when it merged."""
        if not self.writable or self._staging is not None or not self._consolidate_groups(written):
            return False
        self._publish()
        self._pending.clear()
        self._invalidate()
        return True

    def merge(self, group: Sequence[Segment] | None = None) -> None:
        """Merge ``group`` (default: all segments) into one, dropping deleted docs."""
        group = list(group if group is not None else self.segments)
        if len(group) < 2 and not any(s.n_live < s.n_docs for s in group):
            return
        self._merge(group)
        self._publish()
        self._pending.clear()
        self._invalidate()

    def _merge(self, group: Sequence[Segment]) -> None:
        name = f"seg-{self.manifest.next_segment:06d}"
        self.manifest.next_segment += 1
        self._pending.add(name)
        merge_segments(group, self.folder / name)
        first = self.segments.index(group[0])
        rest = [s for s in self.segments if s not in group]
        rest.insert(min(first, len(rest)), Segment(self.folder / name))
        self.segments = rest
        self._invalidate()

    def _invalidate(self) -> None:
        self._stats_cache = None
        self._native_args = None
        self._factors.clear()
        self._max_x.clear()

    # -- statistics -------------------------------------------------------
    def _stats(self) -> tuple[int, np.ndarray]:
        """(live doc count, average field lengths), cached until the next write."""
        if self._stats_cache is None:
            n = 0
            total = np.zeros(N_FIELDS, np.float64)
            for seg in self.segments:
                live = seg.live.astype(bool)
                n += int(live.sum())
                if live.all():
                    total += np.asarray(seg.lens, np.float64).sum(axis=0)
                else:
                    total += np.asarray(seg.lens[live], np.float64).sum(axis=0)
            avg = total / max(n, 1)
            self._stats_cache = (n, np.maximum(avg, 1e-9))
        return self._stats_cache

    def _factor_fm(self, seg: Segment) -> np.ndarray:
        """:meth:`_factor` field-major, float32 [3, N], for the one-call kernel:
        a block whose docs have one field reads 4 bytes of factors per doc,
        not a 12-byte row (the posting loops' most missed load)."""
        key = seg.name + "\0fm"
        fac = self._factors.get(key)
        if fac is None:  # the doc-major array is not kept for it (only if cached)
            rows = self._factors.get(seg.name)
            fac = np.ascontiguousarray((self._compute_factor(seg) if rows is None else rows).T)
            self._factors[key] = fac
        return fac

    def _factor(self, seg: Segment) -> np.ndarray:
        """Per-doc ``weight_f / B_f(doc)``: BM25F length normalisation per field."""
        fac = self._factors.get(seg.name)
        if fac is None:
            fac = self._factors[seg.name] = self._compute_factor(seg)
        return fac

    def _compute_factor(self, seg: Segment) -> np.ndarray:
        """float32 [N, 3] of :meth:`_factor`, computed."""
        _, avg = self._stats()
        w = np.asarray(self.params.weights, np.float32)
        b = np.asarray(self.params.b, np.float32)
        lens = np.asarray(seg.lens, np.float32)
        denom = (1.0 - b) + b * lens / avg.astype(np.float32)
        return np.ascontiguousarray((w / denom).astype(np.float32))

    @property
    def n_docs(self) -> int:
        return self._stats()[0]

    #: Terms kept by the doc-freq memo of one generation; past this it starts again.
    DF_MEMO_TERMS = 100_000

    def doc_freqs(self, hashes: np.ndarray) -> np.ndarray:
        """Document frequency of each hashed term over every segment (deleted docs'
        postings count until a merge drops them), int64. Kept per term until the
        segments change, so only terms not asked before are looked up."""
        key = tuple(self.segments)
        held, memo = self._df_memo  # replaced, never cleared: safe beside another thread
        if key != held or len(memo) > self.DF_MEMO_TERMS:
            memo = {}
            self._df_memo = (key, memo)
        keys = hashes.tolist()
        missing = [h for h in dict.fromkeys(keys) if h not in memo]
        if missing:
            want = np.asarray(missing, np.uint64)
            df = np.zeros(len(want), np.int64)
            for seg in self.segments:
                with _reading(seg.folder):
                    df += seg.term_ranges(want)[1]
            memo.update(zip(missing, df.tolist(), strict=True))
        return np.fromiter((memo[h] for h in keys), np.int64, len(keys))

    def idf(self, df: np.ndarray) -> np.ndarray:
        n = self.n_docs
        return np.log1p((n - df + 0.5) / (df + 0.5))

    # -- queries ----------------------------------------------------------
    def search(
        self,
        terms: Sequence[str],
        k: int = 10,
        *,
        term_weights: Sequence[float] | None = None,
        allowed: np.ndarray | None = None,
        use_native: bool = True,
        prune: bool = True,
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """Top-k (chunk ids, scores, matched count) for a bag of query terms.

        Repeated terms count once with their multiplicity as weight. ``allowed``
        is an optional array of chunk ids to restrict the search to. With
        ``prune`` (exact, MaxScore-style) the matched count is -1 when the
        search stopped before counting every match.
        """
        uniq, weights = self._query_terms(terms, term_weights)
        if not uniq or not self.segments:
            return np.empty(0, np.int64), np.empty(0, np.float32), 0
        hashes = hash_terms(uniq)
        use_blocks = BLOCKMAX_AVAILABLE and prune and use_native
        # One native call. It does not count the matches (the CLI reports them):
        # for one term they are its document frequency when every field's weight
        # is positive (each posting then scores above 0), else the exhaustive
        # scan below counts them.
        single = len(uniq) == 1
        if use_blocks and (not single or self._matches_are_df()):
            try:
                found = search_segments(
                    self._native_segments(allowed),
                    hashes,
                    np.asarray(weights, np.float64),
                    self._block_params(),
                    self.params.k1,
                    self.n_docs,
                    k,
                    exact_bounds=EXACT_BLOCK_BOUNDS,
                    field_major=True,
                )
            except ValueError as exc:  # the kernel names the segment by its place
                n = exc.args[0] if len(exc.args) == 2 and isinstance(exc.args[0], int) else -1
                args = self._native_args or []
                folder = args[n][0].folder if 0 <= n < len(args) else self.folder
                raise _damaged(folder, exc) from None
            if found is not None:
                return found[0], found[1], int(self.doc_freqs(hashes)[0]) if single else -1
        per_seg = []
        for seg in self.segments:
            with _reading(seg.folder):
                per_seg.append(seg.lookup(hashes, blocks=True))
        df = np.sum([p[1] for p in per_seg], axis=0)
        w = (self.idf(df) * np.asarray(weights)).astype(np.float32)
        ids_out, sc_out = [], []
        matched = 0
        best: np.ndarray = np.empty(0, np.float32)  # top-k scores so far, all segments
        block_params = self._block_params() if use_blocks else None
        positive = bool((w > 0).all())
        # Bigger segments first: they set the bar the others must pass.
        for seg, (ranges, _, first_blocks) in sorted(
            zip(self.segments, per_seg, strict=True), key=lambda sr: -sr[0].n_docs
        ):
            if not ranges[1::2].any():
                continue
            live = seg.live
            if allowed is not None:
                mask = np.zeros(seg.n_docs, np.uint8)
                mask[seg.locate(allowed)] = 1
                live = mask & live
            with _reading(seg.folder):
                n_post = int((ranges[1::2] - ranges[0::2]).sum())
                blockmax = BLOCKMAX_AVAILABLE and n_post >= self.BLOCKMAX_MIN_POSTINGS
                if (
                    prune
                    and use_native
                    and blockmax
                    and len(w) > 1
                    and positive
                    and block_params is not None
                ):
                    theta0 = float(best[k - 1]) if len(best) >= k else 0.0
                    local, sc, _ = score_topk_blockmax(
                        seg.packed,
                        self._factor(seg),
                        ranges,
                        first_blocks,
                        seg.blocks,
                        w,
                        live,
                        block_params,
                        self.params.k1,
                        k,
                        theta0,
                    )
                    m = -1
                elif (
                    prune
                    and use_native
                    and len(w) > 1
                    and n_post >= self.PRUNE_MIN_POSTINGS
                    and seg.has_raw
                ):
                    theta0 = float(best[k - 1]) if len(best) >= k else 0.0
                    local, sc, m = self._score_pruned(seg, hashes, ranges, w, live, k, theta0)
                else:
                    docs, tfs, local_ranges = seg.query_postings(ranges, first_blocks)
                    local, sc, m = score_topk(
                        docs,
                        tfs,
                        self._factor(seg),
                        local_ranges,
                        w,
                        live,
                        self.params.k1,
                        k,
                        use_native=use_native,
                    )
            matched = -1 if m < 0 or matched < 0 else matched + m
            ids_out.append(np.asarray(seg.chunk_ids[local]))
            sc_out.append(sc)
            best = np.sort(np.concatenate([best, sc]))[::-1][:k]
        if not ids_out:
            return np.empty(0, np.int64), np.empty(0, np.float32), 0
        ids = np.concatenate(ids_out)
        scores = np.concatenate(sc_out)
        if len(ids_out) > 1:
            order = np.lexsort((ids, -scores))[:k]
            ids, scores = ids[order], scores[order]
        return ids, scores, matched

    def _matches_are_df(self) -> bool:
        """True when every posting of a term scores above 0 in :meth:`search`
        (positive field weights, each field's length normalisation finite), so
        a one-term search matches as many docs as the term's document frequency
        (deleted docs included, as the scan counts them)."""
        p = self.params
        return all(w > 0 for w in p.weights) and all(0 <= b < 1 for b in p.b)

    def _native_segments(self, allowed: np.ndarray | None) -> list[tuple[Any, ...]]:
        """Per-segment arrays for :func:`search_segments`, biggest segment first."""
        key = tuple(self.segments)
        if self._native_args is None or self._native_key != key:
            self._native_key = key
            args: list[list[Any]] = []
            for seg in sorted(self.segments, key=lambda s: -s.n_docs):
                b, p = seg.blocks, seg.packed
                args.append(
                    [
                        seg,
                        (seg.terms, *seg.term_dict, p["packed"], p["blk_pos"]),
                        (p["blk_last"], b["blk_maxtf"], b["blk_minlen"], self._factor_fm(seg)),
                        # block bounds, filled by the kernel as blocks are first
                        # bounded; valid as long as the factor (dropped together
                        # on the next write). Zeroed pages cost no memory until
                        # a query touches them.
                        np.zeros(len(p["blk_last"]), np.float32),
                        *(_impact_cache(seg) if IMPACTS else (None, None)),
                        None,  # the live array last seen ...
                        None,  # ... and what to pass for it (None: every doc live)
                        _member_cache(seg),
                    ]
                )
            self._native_args = args
        out = []
        for entry in self._native_args:
            seg, head, tail, xmax, imp, imp_ok = entry[:6]
            live: np.ndarray | None = seg.live
            if allowed is not None:
                mask = np.zeros(seg.n_docs, np.uint8)
                mask[seg.locate(allowed)] = 1
                live = mask & seg.live
            elif live is entry[6]:
                live = entry[7]
            else:  # checked once per live array, not per query
                entry[6], entry[7] = seg.live, (None if seg.live.all() else seg.live)
                live = entry[7]
            out.append((*head, *tail, live, seg.chunk_ids, xmax, imp, imp_ok, entry[8]))
        return out

    def _block_params(self) -> np.ndarray:
        """float32 [field weights, field b, average field lengths] for block bounds."""
        stats = self._stats()
        if self._params_cache is None or self._params_cache[0] is not stats:
            avg = stats[1]
            arr = np.array([*self.params.weights, *self.params.b, *avg.tolist()], np.float32)
            self._params_cache = (stats, arr)
        return self._params_cache[1]

    def _score_pruned(
        self,
        seg: Segment,
        hashes: np.ndarray,
        ranges: np.ndarray,
        w: np.ndarray,
        live: np.ndarray,
        k: int,
        theta0: float,
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """One segment with pruning; learns each term's largest x for tighter bounds."""
        k1 = self.params.k1
        cache = self._max_x
        keys = [(seg.name, int(h)) for h in hashes.tolist()]
        # x / (x + k1) < 1 always; a term seen before has a tighter, exact bound.
        sat = np.array(
            [(cache[key] / (cache[key] + k1)) if key in cache else 1.0 for key in keys], np.float32
        )
        upper = w * np.float32(k1 + 1) * sat
        order = np.argsort(-upper, kind="stable")
        r2 = ranges.reshape(-1, 2)[order].ravel()
        local, sc, m, maxx = score_topk_pruned(
            seg.docs, seg.tfs, self._factor(seg), r2, w[order], upper[order], live, k1, k, theta0
        )
        for j, mx in zip(order.tolist(), maxx.tolist(), strict=True):
            if mx >= 0:
                cache[keys[j]] = mx
        return local, sc, m

    @staticmethod
    def _query_terms(
        terms: Sequence[str], term_weights: Sequence[float] | None
    ) -> tuple[list[str], list[float]]:
        if term_weights is None:  # plain counts, first-seen order
            counts = dict.fromkeys(terms, 0.0)
            if len(counts) == len(terms):  # no repeats (most queries): all 1
                return list(counts), [1.0] * len(counts)
            for t in terms:
                counts[t] += 1.0
            return list(counts), list(counts.values())
        acc: dict[str, float] = {}
        for i, t in enumerate(terms):
            acc[t] = acc.get(t, 0.0) + (1.0 if term_weights is None else float(term_weights[i]))
        items = [(t, w) for t, w in acc.items() if w > 0]
        return [t for t, _ in items], [w for _, w in items]

    def explain(self, terms: Sequence[str], chunk_id: int) -> dict[str, Any]:
        """Per-term BM25F contributions for one chunk, as plain data."""
        uniq, weights = self._query_terms(terms, None)
        hashes = hash_terms(uniq)
        df = self.doc_freqs(hashes)
        idf = self.idf(df)
        n, avg = self._stats()
        k1 = self.params.k1
        out: dict[str, Any] = {
            "k1": k1,
            "fields": {
                f: {
                    "weight": self.params.weights[i],
                    "b": self.params.b[i],
                    "avg_len": round(float(avg[i]), 3),
                }
                for i, f in enumerate(FIELDS)
            },
            "docs": n,
            "terms": [],
        }
        for seg in self.segments:
            local = seg.locate(np.array([chunk_id], np.int64))
            if local.size == 0 or not seg.live[local[0]]:
                continue
            d = int(local[0])
            fac = self._factor(seg)[d]
            out["lens"] = {f: int(seg.lens[d, i]) for i, f in enumerate(FIELDS)}
            ranges, _, first = seg.lookup(hashes)
            total = 0.0
            for j, term in enumerate(uniq):
                s, e = int(ranges[2 * j]), int(ranges[2 * j + 1])
                docs, tfs = seg.term_postings(s, e, int(first[j]))
                pos = int(np.searchsorted(docs, d))
                if pos >= len(docs) or int(docs[pos]) != d:
                    continue
                tf = tuple(int(x) for x in tfs[pos])
                x = float(sum(tf[i] * float(fac[i]) for i in range(N_FIELDS)))
                contrib = float(weights[j] * idf[j] * x * (k1 + 1) / (x + k1))
                total += contrib
                out["terms"].append(
                    {
                        "term": term,
                        "df": int(df[j]),
                        "idf": round(float(idf[j]), 4),
                        "tf": dict(zip(FIELDS, tf, strict=True)),
                        "query_weight": weights[j],
                        "score": round(contrib, 4),
                    }
                )
            out["total"] = round(total, 4)
        out["terms"].sort(key=lambda t: -t["score"])
        return out

    def status(self) -> dict[str, Any]:
        size = sum(f.stat().st_size for f in self.folder.rglob("*") if f.is_file())
        return {
            "engine": ENGINE,
            "segments": len(self.segments),
            "docs": self.n_docs,
            "deleted": sum(s.n_docs - s.n_live for s in self.segments),
            "terms": sum(len(s.terms) for s in self.segments),
            "postings": sum(s.n_postings for s in self.segments),
            "bytes": size,
            "applied_seq": self.manifest.applied_seq,
            "generation": self.manifest.generation,
            "damaged": self.damaged,
            "params": {
                "k1": self.params.k1,
                "weights": list(self.params.weights),
                "b": list(self.params.b),
            },
        }
