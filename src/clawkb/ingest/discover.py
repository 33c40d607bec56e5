"""Walk folders for files to index, honouring ignore files, never looping.

``.gitignore`` and ``.clawkbignore`` files apply to their folder and below
(gitignore syntax, via pathspec). Hidden folders such as ``.git`` are skipped.
Symlinked folders are followed once (a loop is reported, not followed).
Unreadable folders are reported and skipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec

IGNORE_FILES = (".gitignore", ".clawkbignore")
ALWAYS_SKIP_DIRS = {".git", ".hg", ".svn", ".clawkb", "node_modules", "__pycache__", ".venv"}
MAX_DEPTH = 64


@dataclass(frozen=True, slots=True)
class Found:
    path: Path  # absolute
    root: Path  # the folder given by the user (or the file's parent)


@dataclass(frozen=True, slots=True)
class Problem:
    path: str
    reason: str


def _load_spec(folder: Path) -> pathspec.PathSpec | None:
    lines: list[str] = []
    for name in IGNORE_FILES:
        f = folder / name
        if f.is_file():
            try:
                lines += f.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None


def discover(
    root: Path, extra_ignore: tuple[str, ...] = (), problems: list[Problem] | None = None
) -> Iterator[Found]:
    """Yield files under ``root`` (or ``root`` itself if it is a file)."""
    problems = problems if problems is not None else []
    root = Path(os.path.abspath(root))
    if root.is_file():
        yield Found(root, root.parent)
        return
    if not root.exists():
        problems.append(Problem(str(root), "no such file or folder"))
        return
    base_spec = pathspec.GitIgnoreSpec.from_lines(extra_ignore) if extra_ignore else None
    seen_real: set[str] = set()
    yield from _walk(
        root, root, [] if base_spec is None else [(root, base_spec)], seen_real, problems, 0
    )


def _ignored(path: Path, is_dir: bool, specs: list[tuple[Path, pathspec.PathSpec]]) -> bool:
    for base, spec in specs:
        rel = path.relative_to(base).as_posix() + ("/" if is_dir else "")
        if spec.match_file(rel):
            return True
    return False


def _walk(
    folder: Path,
    root: Path,
    specs: list[tuple[Path, pathspec.PathSpec]],
    seen_real: set[str],
    problems: list[Problem],
    depth: int,
) -> Iterator[Found]:
    if depth > MAX_DEPTH:
        problems.append(Problem(str(folder), f"folder nesting deeper than {MAX_DEPTH}, skipped"))
        return
    real = os.path.realpath(folder)
    if real in seen_real:
        problems.append(Problem(str(folder), "symlink loop, not followed"))
        return
    seen_real.add(real)
    spec = _load_spec(folder)
    if spec is not None:
        specs = [*specs, (folder, spec)]
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        problems.append(Problem(str(folder), f"cannot read folder ({exc.strerror or exc})"))
        return
    for entry in entries:
        path = Path(entry.path)
        try:
            is_dir = entry.is_dir()
            is_file = entry.is_file()
        except OSError as exc:
            problems.append(Problem(str(path), f"cannot stat ({exc.strerror or exc})"))
            continue
        if is_dir:
            if entry.name in ALWAYS_SKIP_DIRS or entry.name.startswith("."):
                continue
            if _ignored(path, True, specs):
                continue
            yield from _walk(path, root, specs, seen_real, problems, depth + 1)
        elif is_file:
            if entry.name in IGNORE_FILES or entry.name.startswith("."):
                continue
            if _ignored(path, False, specs):
                continue
            yield Found(path, root)
        elif entry.is_symlink():
            problems.append(Problem(str(path), "broken symlink, skipped"))
