"""The older tree a benchmark compares against, in the same run.

``git archive`` of a commit's ``src`` (with ``setup.py`` and ``pyproject.toml``)
unpacked once under ``bench/.cache/old-<rev>``; with ``native`` its C
extensions are built in place (``setup.py build_ext --inplace``, the same
compiler flags as this tree), so ``PYTHONPATH=<returned src>`` imports the old
clawkb with its kernels. Used by ``run_all.py --old-ref`` and ``embed_speed.py``.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CACHE = HERE / ".cache"

#: The commit the issue-24 speed work started from (embedding and lexical).
ISSUE24_BASE = "4a2f33d"


def old_src(ref: str, *, native: bool = False) -> tuple[Path, str]:
    """(the old tree's ``src`` folder, a label "git <rev>") for commit ``ref``."""
    rev = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", ref],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    dest = CACHE / f"old-{rev}"
    if not (dest / "src" / "clawkb").is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile() as fh:
            subprocess.run(
                ["git", "-C", str(REPO), "archive", rev, "src", "setup.py", "pyproject.toml"],
                check=True,
                stdout=fh,
            )
            fh.seek(0)
            with tarfile.open(fileobj=fh) as tar:
                tar.extractall(dest, filter="data")
    if native and not any((dest / "src" / "clawkb" / "index").glob("_blockmax*.so")):
        subprocess.run(
            [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
            cwd=dest,
            check=True,
            capture_output=True,
        )
    return dest / "src", f"git {rev}"
