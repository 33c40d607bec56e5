"""Segment readers on damaged files (hypothesis): a truncated or bit-flipped index
file makes the lexical index open as damaged, with a one-line reason naming the
folder, or (a data flip no quick check can see) still answer and still merge; it
never raises anything but a clawkb error and never crashes the process."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clawkb.errors import ClawkbError, IndexCorruptError
from clawkb.index.lexical import LexicalIndex
from clawkb.kb import KnowledgeBase
from safety_helpers import uart_notes_kb

FUZZ = settings(
    max_examples=int(os.environ.get("CLAWKB_FUZZ_EXAMPLES", "40")),
    # the default run is reproducible; a longer one (CLAWKB_FUZZ_EXAMPLES=2000) explores
    derandomize="CLAWKB_FUZZ_EXAMPLES" not in os.environ,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
QUERIES = (["uart", "baud"], ["ddr4", "impedance", "ohm"], ["pull", "ups"], ["missing"])


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real lexical index of a few documents, written by the indexer."""
    return uart_notes_kb(tmp_path_factory.mktemp("fuzzseg")) / "index" / "lexical"


def _write_notes(docs: Path, first: int, n: int) -> None:
    docs.mkdir()
    for i in range(first, first + n):
        (docs / f"n{i}.md").write_text(
            f"# Note {i}\n\nThe UART{i} runs at {115200 * (i + 1)} baud; DDR4 impedance"
            f" is {40 + i} ohm. I2C{i} needs pull-ups of {i}.7k.\n",
            encoding="utf-8",
        )


@pytest.fixture(scope="module")
def two_segments(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real lexical index of two segments (two indexing runs), one doc deleted:
    what a merge reads."""
    root = tmp_path_factory.mktemp("fuzzmerge")
    # lists longer than one block (128 postings), so a merge decodes blocks that
    # are not a term's first
    _write_notes(root / "a", 0, 140)
    _write_notes(root / "b", 140, 10)
    with KnowledgeBase.open(root / "kb", create=True) as kb:
        kb.index([root / "a"])
        kb.index([root / "b"])
        (root / "a" / "n3.md").unlink()
        kb.index([root / "a"])
    folder = root / "kb" / "index" / "lexical"
    index = LexicalIndex(folder)
    try:
        assert len(index.segments) >= 2
    finally:
        index.close()
    return folder


def _files(folder: Path) -> list[Path]:
    """The index's data files: segment arrays and the manifest (not lease files)."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in (".npy", ".json"))


def _answers(index: LexicalIndex) -> list[tuple[list[int], int]]:
    out = []
    for q in QUERIES:
        ids, scores, matched = index.search(q, k=5)
        assert np.all(np.isfinite(scores)) or index.damaged is None
        out.append((ids.tolist(), matched))
    return out


def test_the_pristine_index_answers(pristine: Path) -> None:
    index = LexicalIndex(pristine)
    try:
        assert index.damaged is None and any(ids for ids, _ in _answers(index))
    finally:
        index.close()


@FUZZ
@given(data=st.data(), full_check=st.booleans())
def test_damaged_files_mean_a_damaged_index_never_a_crash(
    pristine: Path, tmp_path: Path, data: st.DataObject, full_check: bool
) -> None:
    folder = Path(tempfile.mkdtemp(dir=tmp_path)) / "lexical"
    shutil.copytree(pristine, folder)
    files = _files(folder)
    victim = data.draw(st.sampled_from(files), label="file")
    raw = bytearray(victim.read_bytes())
    if data.draw(st.booleans(), label="truncate") or not raw:
        raw = raw[: data.draw(st.integers(0, max(0, len(raw) - 1)), label="keep")]
    else:
        at = data.draw(st.integers(0, len(raw) - 1), label="at")
        raw[at] ^= data.draw(st.integers(1, 255), label="mask")
    victim.write_bytes(bytes(raw))

    try:
        index = LexicalIndex(folder, full_check=full_check)
    except ClawkbError:
        return  # refused with a clawkb error: fine
    try:
        if index.damaged is not None:
            assert "\n" not in index.damaged and str(folder) in index.damaged
            assert all(ids == [] for ids, _ in _answers(index))
        else:
            # only a change the quick check cannot see (a data byte without the CRC) may open
            assert not full_check or victim.suffix == ".json", index.folder
            with contextlib.suppress(ClawkbError):
                _answers(index)
    finally:
        index.close()


def _every(step: int, first: int = 0) -> Callable[[Path], object]:
    return lambda seg: slice(first, None, step)


def _block_starts(seg: Path) -> object:
    return np.load(seg / "blk_pos.npy").astype(np.int64)


#: Data bytes (the quick check on open does not read them) that a search kernel
#: would index by: array, where in it (given the segment folder), new value.
DAMAGE: dict[str, tuple[str, Callable[[Path], object], int]] = {
    "first block of a group past the blocks": ("dict_index", _every(3, 1), 1 << 39),
    "escape number past the dictionary": ("dict_index", _every(3, 2), 1 << 20),
    "block offset past the packed bytes": ("blk_pos", _every(1), 1 << 30),
    "gap width over 32 bits": ("packed", _block_starts, 200),
    "block ends past the last doc": ("blk_last", _every(1), 1 << 20),
    "gaps that overshoot the block's last doc": ("packed", lambda seg: slice(1, -8), 255),
}


def _damage(seg: Path, what: str) -> None:
    """Write the data byte ``DAMAGE[what]`` names into segment ``seg`` (skip without it)."""
    name, where, value = DAMAGE[what]
    if not (seg / f"{name}.npy").exists():
        pytest.skip("segments without packed postings (written without the native build)")
    arr = np.load(seg / f"{name}.npy")
    arr[where(seg)] = value  # type: ignore[index]
    np.save(seg / f"{name}.npy", arr)


@pytest.mark.parametrize("what", sorted(DAMAGE))
def test_kernels_read_nothing_outside_the_arrays(pristine: Path, tmp_path: Path, what: str) -> None:
    """Every query path (whole-query kernel, one term, no pruning) refuses a
    segment with such a byte with one line naming it, never reading outside
    an array."""
    folder = tmp_path / "lexical"
    shutil.copytree(pristine, folder)
    (seg,) = sorted(folder.glob("seg-*"))
    _damage(seg, what)
    index = LexicalIndex(folder, full_check=False)
    try:
        assert index.damaged is None  # opens: only the data changed
        refused = 0
        for q in (*QUERIES, ["uart"], ["ohm"]):
            for prune in (True, False):
                try:
                    index.search(q, k=5, prune=prune)
                except IndexCorruptError as exc:
                    assert str(seg) in str(exc) and "\n" not in str(exc)
                    refused += 1
        assert refused
    finally:
        index.close()


def _merge_or_refuse(folder: Path) -> None:
    """Open the index for writing and merge all its segments: a damaged one gives
    one clawkb error (one line naming the index or the segment), never a crash."""
    try:
        index = LexicalIndex(folder, writable=True, full_check=False)
    except ClawkbError:
        return
    try:
        if index.damaged is not None:
            return
        try:
            index.merge()
        except ClawkbError as exc:
            assert "\n" not in str(exc) and str(folder) in str(exc)
            return
        with contextlib.suppress(ClawkbError):
            _answers(index)
    finally:
        index.close()


@FUZZ
@given(data=st.data())
def test_damaged_segments_given_to_a_merge_never_crash(
    two_segments: Path, tmp_path: Path, data: st.DataObject
) -> None:
    folder = Path(tempfile.mkdtemp(dir=tmp_path)) / "lexical"
    shutil.copytree(two_segments, folder)
    victim = data.draw(st.sampled_from([p for p in _files(folder) if p.suffix == ".npy"]))
    raw = bytearray(victim.read_bytes())
    at = data.draw(st.integers(0, len(raw) - 1), label="at")
    raw[at] ^= data.draw(st.integers(1, 255), label="mask")
    victim.write_bytes(bytes(raw))
    _merge_or_refuse(folder)


#: Dictionary fields a merge never reads: it derives offsets from the document
#: frequencies alone, so it writes a good segment despite them.
MERGE_UNREAD = {"first block of a group past the blocks", "escape number past the dictionary"}


@pytest.mark.parametrize("what", sorted(DAMAGE))
def test_a_merge_refuses_a_damaged_segment(two_segments: Path, tmp_path: Path, what: str) -> None:
    """The data bytes the search kernels refuse, given to a merge: one
    IndexCorruptError naming the segment, nothing written, the index as it was
    (or, for a field the merge does not read, the same answers as before)."""
    shutil.copytree(two_segments, tmp_path / "merged")
    pristine = LexicalIndex(tmp_path / "merged", writable=True)
    try:
        pristine.merge()
        expected = _answers(pristine)
    finally:
        pristine.close()
    folder = tmp_path / "lexical"
    shutil.copytree(two_segments, folder)
    seg = sorted(folder.glob("seg-*"))[0]
    _damage(seg, what)
    index = LexicalIndex(folder, writable=True, full_check=False)
    try:
        before = [s.name for s in index.segments]
        if what in MERGE_UNREAD:
            index.merge()
            assert len(index.segments) == 1 and _answers(index) == expected
            return
        with pytest.raises(IndexCorruptError) as caught:
            index.merge()
        assert str(seg) in str(caught.value) and "\n" not in str(caught.value)
        assert [s.name for s in index.segments] == before
    finally:
        index.close()
    assert sorted(p.name for p in folder.glob("seg-*")) == sorted(before)


def test_a_merge_refuses_terms_out_of_order(two_segments: Path, tmp_path: Path) -> None:
    """Found by the fuzz test above in the pure-Python merge: a segment whose term
    hashes are out of order scattered postings onto other terms' slots and the merge
    crashed (IndexError) on the slots it never wrote. Now one clawkb error."""
    folder = tmp_path / "lexical"
    shutil.copytree(two_segments, folder)
    victim = sorted(folder.glob("seg-*"))[-1] / "terms.npy"
    terms = np.load(victim)
    terms[[0, 1]] = terms[[1, 0]]
    np.save(victim, terms)
    _merge_or_refuse(folder)
