"""Regex/indent fallback symbol finder, for when a tree-sitter grammar is missing.

A definition is found by a start-line pattern per language; where it ends is
decided by structure, not by the pattern: Python by indentation (the body
is every following line indented deeper, blank lines included), brace
languages by matching ``{``/``}`` from the start line while skipping strings
and comments. A brace-language match whose line reaches ``;`` before ``{``
is a declaration (a prototype, ``struct foo;``), not a definition, and is
skipped. Nesting (methods in classes and impls) follows from containment.
Comments directly above a definition belong to it, as with tree-sitter.
"""

from __future__ import annotations

import re

from clawkb.parsers.code_symbols import Symbol, nest

_KEYWORDS = frozenset(
    [
        "if",
        "for",
        "while",
        "switch",
        "return",
        "else",
        "do",
        "catch",
        "sizeof",
        "case",
        "new",
        "delete",
        "throw",
        "typeof",
        "await",
    ]
)
_VIS = r"(?:pub(?:\([^)]*\))?\s+)?"
_JSX = r"(?:export\s+(?:default\s+)?)?(?:declare\s+)?"
PATTERNS: dict[str, list[tuple[re.Pattern[str], str]]] = {
    "python": [
        (re.compile(r"^(?P<indent>[ \t]*)(?:async[ \t]+)?def[ \t]+(?P<name>\w+)"), "function"),
        (re.compile(r"^(?P<indent>[ \t]*)class[ \t]+(?P<name>\w+)"), "class"),
    ],
    "c": [
        (re.compile(r"^(?:typedef\s+)?(?P<kind>struct|union|enum)\s+(?P<name>\w+)\s*\{?\s*$"), ""),
        (re.compile(r"^#\s*define\s+(?P<name>\w+)\("), "macro"),
        (re.compile(r"^[A-Za-z_][\w \t\*&]*?[\s\*&](?P<name>[A-Za-z_]\w*)\s*\([^;]*$"), "function"),
    ],
    "rust": [
        (
            re.compile(
                rf"^\s*{_VIS}(?:(?:async|const|unsafe|extern\s+\"[^\"]*\")\s+)*fn\s+(?P<name>\w+)"
            ),
            "function",
        ),
        (re.compile(rf"^\s*{_VIS}(?P<kind>struct|enum|trait|union|mod)\s+(?P<name>\w+)"), ""),
        (re.compile(r"^\s*impl(?:<[^>]*>)?\s+(?:[\w:<>, &']+\s+for\s+)?(?P<name>[\w:]+)"), "impl"),
        (re.compile(r"^\s*macro_rules!\s*(?P<name>\w+)"), "macro"),
    ],
    "go": [
        (
            re.compile(r"^func\s+(?:\(\s*\w*\s*\*?(?P<recv>\w+)[^)]*\)\s*)?(?P<name>\w+)\s*[\(\[]"),
            "function",
        ),
        (re.compile(r"^type\s+(?P<name>\w+)\s+(?P<kind>struct|interface)\b"), ""),
    ],
    "javascript": [
        (re.compile(rf"^\s*{_JSX}(?:async\s+)?function\s*\*?\s*(?P<name>\w+)"), "function"),
        (re.compile(rf"^\s*{_JSX}(?:abstract\s+)?class\s+(?P<name>\w+)"), "class"),
        (re.compile(rf"^\s*{_JSX}(?P<kind>interface|enum)\s+(?P<name>\w+)"), ""),
        (
            re.compile(
                r"^\s*(?:export\s+)?(?:const|let|var)\s+(?P<name>\w+)\s*(?::[^=]+)?=\s*(?:async\s+)?(?:function\b|(?:\([^)]*\)|\w+)\s*(?::[^=]+)?=>)"
            ),
            "function",
        ),
        (
            re.compile(
                r"^\s+(?:(?:public|private|protected|static|async|readonly|override|get|set)\s+)*(?P<name>\w+)\s*(?:<[^>]*>)?\([^)]*\)?\s*(?::[^{;]+)?\{?\s*$"
            ),
            "function",
        ),
    ],
    "bash": [
        (re.compile(r"^\s*(?:function\s+)?(?P<name>[\w-]+)\s*\(\)\s*\{?"), "function"),
        (re.compile(r"^\s*function\s+(?P<name>[\w-]+)\s*\{?"), "function"),
    ],
}
PATTERNS["cpp"] = [
    (
        re.compile(
            r"^\s*(?:template\s*<[^>]*>\s*)?(?P<kind>class|struct|union|enum(?:\s+class)?|namespace)\s+(?P<name>\w+)[^;]*$"
        ),
        "",
    ),
    *PATTERNS["c"][1:],
    (
        re.compile(
            r"^\s+(?:virtual\s+|static\s+|inline\s+)*[A-Za-z_][\w:<>\s\*&]*?[\s\*&](?P<name>~?[A-Za-z_]\w*)\s*\([^;]*$"
        ),
        "function",
    ),
]
PATTERNS["typescript"] = PATTERNS["tsx"] = PATTERNS["javascript"]
_COMMENT_LINE = re.compile(r"^\s*(?:#(?!include|define|if|endif|pragma|!)|//|/\*|\*|--)")


def find_symbols(text: str, language: str) -> list[Symbol]:
    lines = text.split("\n")
    found: list[Symbol] = []
    for i, line in enumerate(lines):
        for pattern, kind in PATTERNS.get(language, []):
            m = pattern.match(line)
            if m is None or m.group("name") in _KEYWORDS:
                continue
            end = _python_end(lines, i) if language == "python" else _brace_end(lines, i, language)
            if end is None:
                break
            groups = m.groupdict()
            sym_kind = kind or (groups.get("kind") or "type").split()[0]
            parent = (groups["recv"],) if groups.get("recv") else ()
            start = _comment_start(lines, i)
            found.append(
                Symbol(m.group("name"), sym_kind, start, end, parent, sym_kind == "function")
            )
            break
    return nest(found)


def _python_end(lines: list[str], i: int) -> int:
    indent = len(lines[i]) - len(lines[i].lstrip())
    end = i
    for j in range(i + 1, len(lines)):
        line = lines[j]
        if not line.strip():
            continue
        if len(line) - len(line.lstrip()) <= indent and not line.lstrip().startswith(
            (")", "]", "}")
        ):
            break
        end = j
    return end + 1


def _brace_end(lines: list[str], i: int, language: str) -> int | None:
    """1-based last line of the block opened at/after line ``i``; ``None`` for declarations."""
    depth, opened = 0, False
    for j in range(i, min(len(lines), i + 20000)):
        code = _strip_strings(lines[j], language)
        for ch in code:
            if (
                ch == ";"
                and not opened
                and language not in ("bash", "go", "javascript", "typescript", "tsx")
            ):
                return i + 1 if language == "rust" and j == i else None
            if ch == "{":
                depth += 1
                opened = True
            elif ch == "}" and opened:
                depth -= 1
                if depth == 0:
                    return j + 1
        if not opened and j - i >= 3:
            return None  # no body within a few lines: not a definition
    return len(lines) if opened else None


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.){0,2}\'|`(?:[^`\\]|\\.)*`')


def _strip_strings(line: str, language: str) -> str:
    line = _STRING.sub('""', line)
    cut = line.find("//") if language != "bash" else line.find("#")
    if cut >= 0:
        line = line[:cut]
    return re.sub(r"/\*.*?\*/", "", line)


def _comment_start(lines: list[str], i: int) -> int:
    start = i
    while start > 0 and (
        _COMMENT_LINE.match(lines[start - 1]) or lines[start - 1].lstrip().startswith("@")
    ):
        start -= 1
    return start + 1
