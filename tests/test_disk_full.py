"""A full disk (issue 20, item 5): one line, reads keep working, no temp files left,
`doctor --repair` works once there is room again.

The KB lives on a small tmpfs (mounting needs root: skipped with the reason
where it is not allowed); the disk is filled with a ballast file, then an
`index` of new text runs out of space.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from safety_helpers import make_corpus, unique

CLAWKB = str(Path(sys.executable).parent / "clawkb")


@contextlib.contextmanager
def small_disk(where: Path, mb: int) -> Iterator[Path]:
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={mb}m", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip() or 'not root'}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(path: Path, leave: int) -> None:
    """Write ``path`` until only about ``leave`` bytes stay free on its disk."""
    free = os.statvfs(path.parent).f_bavail * os.statvfs(path.parent).f_frsize
    with open(path, "wb") as fh, contextlib.suppress(OSError):
        fh.write(b"\0" * max(0, free - leave))


def _clawkb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLAWKB, *args], capture_output=True, text=True, timeout=180)


def test_a_full_disk_is_one_line_and_reads_keep_working(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", 12) as disk:
        home = disk / "kb"
        notes = tmp_path / "notes"  # the sources live elsewhere
        make_corpus(notes, 20)
        first = _clawkb("--kb", str(home), "index", str(notes))
        assert first.returncode == 0, first.stderr
        big = tmp_path / "big"
        big.mkdir()
        for i in range(12):
            words = " ".join(f"bulk{i}w{j}" for j in range(4000))
            (big / f"bulk{i:02d}.md").write_text(f"# Bulk {i}\n\n{words}\n")
        ballast = disk / "ballast.bin"
        _fill(ballast, 256 << 10)

        full = _clawkb("--kb", str(home), "index", str(big))
        assert full.returncode != 0, full.stdout
        lines = [
            ln for ln in full.stderr.strip().splitlines() if not ln.startswith("knowledge base:")
        ]
        assert "Traceback" not in full.stderr
        assert len(lines) == 1 and "the disk is full" in lines[0], full.stderr
        assert "needs about" in lines[0] and "MB" in lines[0]
        assert not list((home / "index").rglob("*.tmp")), list((home / "index").rglob("*.tmp"))

        for i in (0, 7, 19):  # old content: searches work on the last published index
            found = _clawkb("--kb", str(home), "search", unique(i))
            assert found.returncode == 0, found.stderr
            assert f"doc{i:03d}.md" in found.stdout.splitlines()[0]
            assert "Traceback" not in found.stderr

        still_full = _clawkb("--kb", str(home), "doctor", "--repair")
        assert "Traceback" not in still_full.stderr
        assert len((still_full.stderr or "x").strip().splitlines()) <= 1

        ballast.unlink()  # space returns
        fixed = _clawkb("--kb", str(home), "doctor", "--repair")
        assert fixed.returncode == 0, fixed.stdout + fixed.stderr
        again = _clawkb("--kb", str(home), "index", str(big))
        assert again.returncode == 0, again.stderr
        found = _clawkb("--kb", str(home), "search", "bulk3w17")
        assert "bulk03.md" in found.stdout.splitlines()[0], found.stdout
        assert not list((home / "index").rglob("*.tmp"))
