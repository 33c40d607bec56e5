"""Walk folders for files to index: ignore files, default ignores, confinement, no loops.

* ``.gitignore`` and ``.clawkbignore`` apply to their folder and below
  (gitignore syntax, via pathspec); so do the ``ignore:`` patterns of
  ``config.yaml``. Hidden files and folders (``.git``, ``.venv``…) are skipped.
* **Default ignores** skip what is generated, minified or vendored (see
  :data:`DEFAULT_IGNORES`); each one is *reported* as skipped with its reason.
  ``--include GLOB`` (``include=``) indexes a matching file anyway; a folder
  such as ``vendor/`` is entered only when an include pattern names it.
* **Confinement**: nothing outside the folder given is indexed. A symlink
  whose target leaves the root is skipped with a line in the report, unless
  ``follow_symlinks: outside`` is set (``never`` skips every symlink).
  Symlinked folders inside the root are followed once (a loop is reported).
  A **hard-linked file** (more than one name, ``st_nlink > 1``) is treated
  like a symlink that may leave the root: its other names cannot be found
  without searching the whole disk, so it is skipped with a line in the
  report, unless ``follow_symlinks: outside`` is set.
* An unreadable folder, or one whose ignore file cannot be read, is one
  problem line and the walk goes on (its files keep their indexed content).
  So is a folder nested deeper than :data:`MAX_DEPTH`; loops and broken
  symlinks are skipped, with a line each.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from clawkb.errors import ConfigError

IGNORE_FILES = (".gitignore", ".clawkbignore")
#: Tool state, never content (also hidden, except ``__pycache__``); skipped silently.
ALWAYS_SKIP_DIRS = {".git", ".hg", ".svn", ".clawkb", "__pycache__", ".venv"}
MAX_DEPTH = 64
#: Values of ``follow_symlinks`` in config.yaml; the first is the default.
SYMLINK_POLICIES = ("inside", "outside", "never")

_VENDORED = "vendored dependencies"
_BUILD = "build output"
_MINIFIED = "minified file"
_SOURCE_MAP = "source map"
_LOCK = "lock file"
#: ``(gitignore pattern, reason)``: skipped unless ``--include`` matches.
DEFAULT_IGNORES: tuple[tuple[str, str], ...] = (
    ("node_modules/", _VENDORED),
    ("bower_components/", _VENDORED),
    ("jspm_packages/", _VENDORED),
    ("vendor/", _VENDORED),
    ("site-packages/", _VENDORED),
    ("dist/", _BUILD),
    ("build/", _BUILD),
    ("*.min.js", _MINIFIED),
    ("*.min.mjs", _MINIFIED),
    ("*.min.css", _MINIFIED),
    ("*-min.js", _MINIFIED),
    ("*.bundle.js", _MINIFIED),
    ("*.js.map", _SOURCE_MAP),
    ("*.mjs.map", _SOURCE_MAP),
    ("*.css.map", _SOURCE_MAP),
    ("*.ts.map", _SOURCE_MAP),
    ("*.lock", _LOCK),
    ("package-lock.json", _LOCK),
    ("npm-shrinkwrap.json", _LOCK),
    ("pnpm-lock.yaml", _LOCK),
    ("go.sum", _LOCK),
)
_DEFAULT_SPECS = tuple(
    (pathspec.GitIgnoreSpec.from_lines([pattern]), pattern, reason)
    for pattern, reason in DEFAULT_IGNORES
)


def _any_default(specs: tuple[tuple[pathspec.PathSpec, str, str], ...]) -> re.Pattern[str] | None:
    """One regex that matches where any default ignore does (none of them negates), so
    a file no default ignores — nearly all — costs one match, not one per pattern
    (a server re-walks the folder it indexes on every API write). None: the
    patterns are not all plain regexes, test them one by one."""
    parts = []
    for spec, _, _ in specs:
        for pat in spec.patterns:
            regex = getattr(pat, "regex", None)
            if not getattr(pat, "include", False) or regex is None:
                return None
            parts.append(f"(?:{re.sub(r'[(][?]P<[^>]+>', '(?:', regex.pattern)})")
    return re.compile("|".join(parts)) if parts else None


_DEFAULT_ANY = _any_default(_DEFAULT_SPECS)

#: Web assets and data checked for minified content (never prose: a Chinese
#: paragraph is a long line without spaces, and it is not junk). Only the
#: first :data:`MINIFIED_SNIFF_BYTES` are read, on every run.
MINIFIABLE_SUFFIXES = frozenset(
    [
        ".js",
        ".mjs",
        ".cjs",
        ".jsx",
        ".ts",
        ".mts",
        ".cts",
        ".tsx",
        ".css",
        ".scss",
        ".less",
        ".json",
        ".geojson",
        ".svg",
    ]
)
MINIFIED_SNIFF_BYTES = 65536
#: A line at least this long whose blanks are under :data:`MINIFIED_BLANK_SHARE`
#: marks a generated file (minified JS measured 1.4-2.5 % blanks, hand code 15 %+).
MINIFIED_LINE_CHARS = 1000
MINIFIED_BLANK_SHARE = 0.05


@dataclass(frozen=True, slots=True)
class Found:
    path: Path  # absolute
    root: Path  # the folder given by the user (or the file's parent)


@dataclass(frozen=True, slots=True)
class Problem:
    path: str
    reason: str


@dataclass(slots=True)
class WalkOptions:
    """How one walk treats ignores and symlinks, and where it reports."""

    extra_ignore: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    follow_symlinks: str = SYMLINK_POLICIES[0]
    problems: list[Problem] = field(default_factory=list)
    skipped: list[Problem] = field(default_factory=list)


def hardlink_reason(path: Path) -> str | None:
    """Why a file with several hard links is not read (its other names may be anywhere)."""
    try:
        links = os.stat(path).st_nlink
    except OSError:
        return None  # the reader reports what is wrong with it
    if links <= 1:
        return None
    return (
        f"hard link ({links} names; the others may be outside the indexed folder)"
        " (set follow_symlinks: outside in config.yaml to index it)"
    )


def check_symlink_policy(value: str) -> str:
    if value not in SYMLINK_POLICIES:
        allowed = ", ".join(SYMLINK_POLICIES)
        raise ConfigError(f"config.yaml: follow_symlinks must be one of {allowed}, not {value!r}")
    return value


def discover(
    root: Path,
    extra_ignore: tuple[str, ...] = (),
    problems: list[Problem] | None = None,
    *,
    include: Sequence[str] = (),
    follow_symlinks: str = SYMLINK_POLICIES[0],
    skipped: list[Problem] | None = None,
) -> Iterator[Found]:
    """Yield files under ``root`` (or ``root`` itself if it is a file).

    Unreadable things go to ``problems``, ignored-by-default and confined
    things to ``skipped`` (both ``(path, reason)``).
    """
    opts = WalkOptions(
        tuple(extra_ignore),
        tuple(include),
        check_symlink_policy(follow_symlinks),
        problems if problems is not None else [],
        skipped if skipped is not None else [],
    )
    root = Path(os.path.abspath(root))
    try:
        is_file = root.is_file()
        exists = is_file or root.exists()
    except OSError as exc:
        opts.problems.append(Problem(str(root), f"cannot read ({exc.strerror or exc})"))
        return
    if is_file:
        reason = None if opts.follow_symlinks == "outside" else hardlink_reason(root)
        if reason is not None:
            opts.skipped.append(Problem(str(root), reason + "; skipped"))
            return
        yield Found(root, root.parent)
        return
    if not exists:
        opts.problems.append(Problem(str(root), "no such file or folder"))
        return
    walker = _Walker(root, opts)
    yield from walker.walk(root, walker.base_specs, 0)


def minified_reason(head: bytes) -> str | None:
    """Why a file starting with ``head`` looks generated: a very long line, almost no blanks."""
    for line in head.split(b"\n"):
        if len(line) >= MINIFIED_LINE_CHARS:
            blanks = line.count(b" ") + line.count(b"\t")
            if blanks < len(line) * MINIFIED_BLANK_SHARE:
                return (
                    f"minified or generated (a line of {len(line)}+ characters, almost no spaces)"
                )
    return None


def _sniff_minified(path: Path) -> str | None:
    if path.suffix.lower() not in MINIFIABLE_SUFFIXES:
        return None
    try:
        with open(path, "rb") as fh:
            head = fh.read(MINIFIED_SNIFF_BYTES)
    except OSError:
        return None  # reading it again at index time reports the error
    return minified_reason(head) if len(head) >= MINIFIED_LINE_CHARS else None


Specs = list[tuple[Path, pathspec.PathSpec]]


class _Walker:
    def __init__(self, root: Path, opts: WalkOptions) -> None:
        self.root = root
        self.real_root = os.path.realpath(root)
        self.opts = opts
        self.include = pathspec.GitIgnoreSpec.from_lines(opts.include) if opts.include else None
        self.base_specs: Specs = (
            [(root, pathspec.GitIgnoreSpec.from_lines(opts.extra_ignore))]
            if opts.extra_ignore
            else []
        )
        self.seen_real: set[str] = set()

    def walk(self, folder: Path, specs: Specs, depth: int) -> Iterator[Found]:
        problems, skipped = self.opts.problems, self.opts.skipped
        if depth > MAX_DEPTH:
            problems.append(
                Problem(str(folder), f"folder nesting deeper than {MAX_DEPTH}, skipped")
            )
            return
        real = os.path.realpath(folder)
        if real in self.seen_real:
            skipped.append(Problem(str(folder), "symlink loop, not followed"))
            return
        self.seen_real.add(real)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
            spec = _load_spec(folder)
        except OSError as exc:
            problems.append(Problem(str(folder), f"cannot read folder ({exc.strerror or exc})"))
            return
        if spec is not None:
            specs = [*specs, (folder, spec)]
        for entry in entries:
            yield from self._entry(entry, specs, depth)

    def _entry(self, entry: os.DirEntry[str], specs: Specs, depth: int) -> Iterator[Found]:
        path = Path(entry.path)
        try:
            is_link = entry.is_symlink()
            is_dir = entry.is_dir()
            is_file = entry.is_file()
        except OSError as exc:
            self.opts.problems.append(Problem(str(path), f"cannot stat ({exc.strerror or exc})"))
            return
        if entry.name.startswith(".") or (is_dir and entry.name in ALWAYS_SKIP_DIRS):
            return
        if is_file and entry.name in IGNORE_FILES:
            return
        if not is_dir and not is_file:
            if is_link:
                self.opts.skipped.append(Problem(str(path), "broken symlink, skipped"))
            return
        if _ignored(path, is_dir, specs):
            return
        if is_link and not self._link_allowed(path):
            return
        reason = self._default_ignore(path, is_dir)
        if reason is not None:
            self.opts.skipped.append(Problem(str(path) + ("/" if is_dir else ""), reason))
            return
        if is_dir:
            yield from self.walk(path, specs, depth + 1)
        elif self._hardlink_allowed(path):
            yield Found(path, self.root)

    def _hardlink_allowed(self, path: Path) -> bool:
        if self.opts.follow_symlinks == "outside":
            return True
        reason = hardlink_reason(path)
        if reason is not None:
            self.opts.skipped.append(Problem(str(path), reason + "; skipped"))
            return False
        return True

    def _link_allowed(self, path: Path) -> bool:
        policy = self.opts.follow_symlinks
        if policy == "outside":
            return True
        if policy == "never":
            self.opts.skipped.append(
                Problem(str(path), "symlink, skipped (follow_symlinks: never)")
            )
            return False
        target = os.path.realpath(path)
        if target == self.real_root or target.startswith(self.real_root.rstrip("/") + "/"):
            return True
        self.opts.skipped.append(
            Problem(
                str(path),
                f"symlink to {target}, outside the indexed folder; skipped"
                " (set follow_symlinks: outside in config.yaml to follow it)",
            )
        )
        return False

    def _default_ignore(self, path: Path, is_dir: bool) -> str | None:
        rel = path.relative_to(self.root).as_posix() + ("/" if is_dir else "")
        hit = _DEFAULT_ANY is None or _DEFAULT_ANY.match(rel) is not None
        for spec, pattern, reason in _DEFAULT_SPECS if hit else ():
            if spec.match_file(rel):
                if self._included(rel, is_dir):
                    return None
                return f"{reason} (default ignore {pattern!r}; --include GLOB indexes it)"
        minified = None if is_dir else _sniff_minified(path)
        if minified is not None and not self._included(rel, False):
            return f"{minified}; default ignore, --include GLOB indexes it"
        return None

    def _included(self, rel: str, is_dir: bool) -> bool:
        if self.include is None:
            return False
        if self.include.match_file(rel):
            return True
        # enter an ignored folder only when an include pattern names it
        name = rel.rstrip("/").rsplit("/", 1)[-1]
        return is_dir and any(
            name in inc.replace("\\", "/").split("/") for inc in self.opts.include
        )


def _load_spec(folder: Path) -> pathspec.PathSpec | None:
    """The folder's ignore files; ``OSError`` when one exists but cannot be read."""
    lines: list[str] = []
    for name in IGNORE_FILES:
        f = folder / name
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            continue
        except OSError as exc:
            raise OSError(exc.errno, f"cannot read {name}: {exc.strerror or exc}") from exc
        lines += text.splitlines()
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None


def _ignored(path: Path, is_dir: bool, specs: Specs) -> bool:
    for base, spec in specs:
        rel = path.relative_to(base).as_posix() + ("/" if is_dir else "")
        if spec.match_file(rel):
            return True
    return False
