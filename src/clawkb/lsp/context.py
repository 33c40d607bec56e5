"""What the cursor points at, as a knowledge-base query: plain functions over text.

Hover searches for the comment paragraph, the string literal or the identifier
under the cursor (in that order), and a ``clawkb:ANCHOR`` reference names a
chunk directly. Comments are recognised per language by their markers; an
unknown language uses ``#`` and ``//``. These are heuristics over one
document's text — no parser — so they stay fast and never fail: the worst
case is a query made of the word under the cursor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: line-comment markers per LSP language id (or file extension)
_HASH = ("#",)
_SLASH = ("//",)
LINE_MARKERS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        [
            "python",
            "shellscript",
            "sh",
            "bash",
            "zsh",
            "fish",
            "yaml",
            "toml",
            "ruby",
            "perl",
            "r",
            "makefile",
            "dockerfile",
            "cmake",
            "nix",
            "elixir",
            "julia",
            "powershell",
            "conf",
            "ini",
            "properties",
            "gitignore",
            "py",
            "rb",
            "pl",
            "yml",
            "mk",
        ],
        _HASH,
    ),
    **dict.fromkeys(
        [
            "c",
            "cpp",
            "objective-c",
            "objective-cpp",
            "java",
            "javascript",
            "javascriptreact",
            "typescript",
            "typescriptreact",
            "go",
            "rust",
            "swift",
            "kotlin",
            "csharp",
            "scala",
            "dart",
            "php",
            "zig",
            "proto",
            "groovy",
            "jsonc",
            "h",
            "hpp",
            "cc",
            "cxx",
            "js",
            "jsx",
            "ts",
            "tsx",
            "rs",
            "kt",
            "cs",
        ],
        _SLASH,
    ),
    **dict.fromkeys(["sql", "lua", "haskell", "ada", "vhdl", "hs"], ("--",)),
    **dict.fromkeys(["lisp", "clojure", "scheme", "asm", "nasm", "s"], (";",)),
    **dict.fromkeys(["latex", "tex", "matlab", "erlang"], ("%",)),
    **dict.fromkeys(["markdown", "html", "xml", "md", "htm"], ()),
}
#: block comments (open, close), tried around the cursor
BLOCKS: dict[str, tuple[tuple[str, str], ...]] = {
    **dict.fromkeys(LINE_MARKERS, ()),
    **{k: (("/*", "*/"),) for k, v in LINE_MARKERS.items() if v == _SLASH},
    **dict.fromkeys(["markdown", "html", "xml", "md", "htm"], (("<!--", "-->"),)),
    **dict.fromkeys(["css", "scss", "less"], (("/*", "*/"),)),
}
#: triple-quoted strings (Python docstrings) are treated as strings
TRIPLE_QUOTES = ("python", "py")
DEFAULT_MARKERS = ("#", "//")
#: longest query taken from a comment or string (characters)
MAX_QUERY = 400
#: comment lines taken above and below the cursor's line
MAX_LINES = 8

ANCHOR_REF = re.compile(r"clawkb:#?([0-9a-fA-F]{4,16})(?![0-9a-fA-F])")
_WORD = re.compile(r"\w+")
_SPACE = re.compile(r"\s+")
#: a comment's leading decoration: markers, doc-comment stars, `!`, `/`
_DECOR = re.compile(r"^[\s/*#;%!<>-]*")


@dataclass(frozen=True)
class Target:
    """What the cursor is on: ``kind`` comment | string | identifier | anchor."""

    kind: str
    text: str
    #: (line, column) of the span's start and end, 0-based, columns in code points
    start: tuple[int, int]
    end: tuple[int, int]


def language_of(language_id: str | None, uri: str = "") -> str:
    """The key into the marker tables: the LSP language id, else the file extension."""
    if language_id and language_id in LINE_MARKERS:
        return language_id
    ext = uri.rsplit("/", 1)[-1].rsplit(".", 1)[-1].lower() if "." in uri else ""
    if ext in LINE_MARKERS or ext in BLOCKS:
        return ext
    return language_id or ""


def anchor_at(line: str, column: int) -> re.Match[str] | None:
    """The ``clawkb:ANCHOR`` reference that contains ``column`` on ``line``, if any."""
    for m in ANCHOR_REF.finditer(line):
        if m.start() <= column <= m.end():
            return m
    return None


def target_at(lines: list[str], line: int, column: int, language: str = "") -> Target | None:
    """What to search for at (``line``, ``column``); None on blank space."""
    if not 0 <= line < len(lines):
        return None
    text = lines[line].rstrip("\r\n")
    column = max(0, min(column, len(text)))
    ref = anchor_at(text, column)
    if ref:
        return Target("anchor", ref.group(1).lower(), (line, ref.start()), (line, ref.end()))
    found = _block_at(lines, line, column, language)
    if found:
        return found
    markers = LINE_MARKERS.get(language, DEFAULT_MARKERS)
    strings, comment = _scan(text, markers)
    if comment is not None and column >= comment:
        return _comment_paragraph(lines, line, comment, markers)
    for start, end in strings:
        if start < column < end:
            inner = _squash(text[start + 1 : end - 1])
            if len(inner) >= 2:
                return Target("string", inner, (line, start), (line, end))
    for m in _WORD.finditer(text):
        if m.start() <= column <= m.end():
            return Target("identifier", m.group(), (line, m.start()), (line, m.end()))
    return None


def _squash(text: str) -> str:
    return _SPACE.sub(" ", text).strip()[:MAX_QUERY]


def _scan(text: str, markers: tuple[str, ...]) -> tuple[list[tuple[int, int]], int | None]:
    """String spans (start, end-exclusive, quotes included) and where a line comment starts."""
    strings: list[tuple[int, int]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'`":
            j = i + 1
            while j < n and text[j] != ch:
                j += 2 if text[j] == "\\" else 1
            if ch == "'" and j >= n:  # an apostrophe in prose, not a string
                i += 1
                continue
            strings.append((i, min(j + 1, n)))
            i = j + 1
            continue
        for marker in markers:
            if text.startswith(marker, i):
                return strings, i
        i += 1
    return strings, None


def _is_comment_line(text: str, markers: tuple[str, ...]) -> bool:
    s = text.lstrip()
    return any(s.startswith(m) for m in markers)


def _comment_body(text: str) -> str:
    return _DECOR.sub("", text).strip()


def _comment_paragraph(lines: list[str], line: int, start: int, markers: tuple[str, ...]) -> Target:
    """The comment at ``line`` plus adjacent comment-only lines, up to a blank comment line."""
    first = _comment_body(lines[line][start:])
    body = [first]
    top = bottom = line
    whole_line = not lines[line][:start].strip()
    if whole_line and first:
        for step in (-1, 1):
            k = line + step
            while 0 <= k < len(lines) and abs(k - line) <= MAX_LINES:
                if not _is_comment_line(lines[k], markers):
                    break
                part = _comment_body(lines[k])
                if not part:
                    break
                if step < 0:
                    body.insert(0, part)
                    top = k
                else:
                    body.append(part)
                    bottom = k
                k += step
    end_col = len(lines[bottom].rstrip("\r\n"))
    return Target(
        "comment", _squash(" ".join(body)), (top, start if top == line else 0), (bottom, end_col)
    )


def _block_at(lines: list[str], line: int, column: int, language: str) -> Target | None:
    """A block comment (``/* */``, ``<!-- -->``) or a triple-quoted string around the cursor."""
    pairs = list(BLOCKS.get(language, (("/*", "*/"),) if not language else ()))
    if language in TRIPLE_QUOTES:
        pairs += [('"""', '"""'), ("'''", "'''")]
    if not pairs:
        return None
    lo = max(0, line - 4 * MAX_LINES)
    window = lines[lo : line + 4 * MAX_LINES + 1]
    text = "\n".join(s.rstrip("\r\n") for s in window)
    offset = sum(len(s.rstrip("\r\n")) + 1 for s in window[: line - lo]) + column
    for open_, close in pairs:
        if open_ == close:
            before = text[:offset]
            if before.count(open_) % 2 == 0:
                continue
            begin = before.rfind(open_)
        else:
            begin = text.rfind(open_, 0, offset)
            if begin < 0 or text.rfind(close, 0, offset) > begin:
                continue
        finish = text.find(close, begin + len(open_))
        if finish < 0 or finish + len(close) < offset:
            continue
        inner = text[begin + len(open_) : finish]
        body = " ".join(_comment_body(s) for s in inner.splitlines())
        kind = "string" if open_ in ('"""', "'''") else "comment"
        if len(_squash(body)) < 2:
            continue
        return Target(
            kind,
            _squash(body),
            _line_col(text, begin, lo),
            _line_col(text, finish + len(close), lo),
        )
    return None


def _line_col(text: str, offset: int, first_line: int) -> tuple[int, int]:
    head = text[:offset]
    return first_line + head.count("\n"), offset - (head.rfind("\n") + 1)
