"""JSON, JSON Lines and YAML parsers: key paths become heading paths.

``{"board": {"pins": {"red_led": "PA5"}}}`` yields a slice under the heading
path ``("board", "pins")`` whose text is ``board.pins.red_led: PA5``: the
full dotted key path is in the text (searchable whole or by part, since the
tokenizer splits identifiers) and the parent path is in the heading (the
BM25F title field). Array items are ``pins[0]``. Scalar siblings under one
parent form one slice; each line of it is one value with its real line
number.

Line numbers come from the source, not from a re-serialisation: JSON is
validated with :func:`json.loads` (C speed, exact error positions), then a
light token scan assigns lines; YAML is composed into nodes, which carry
their marks.

Hostile input: nesting deeper than :data:`MAX_DEPTH` and more than
:data:`MAX_VALUES` values are refused with
:class:`~clawkb.errors.UnsafeFileError`. YAML aliases are *not expanded*:
an alias to a mapping or sequence already seen is written as a reference
(``key: *same as board.defaults``), so a "billion laughs" YAML costs as much
as its text. The pure-Python YAML composer is used on purpose: on absurd
nesting it raises ``RecursionError`` (reported) where a C composer could
overflow the C stack.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import PurePath
from typing import ClassVar

import yaml

from clawkb.errors import ParseError, UnsafeFileError
from clawkb.parsers.safety import guard
from clawkb.parsers.sniff import decode_text_or_reject
from clawkb.text.decode import normalize_newlines
from clawkb.types import ParsedDocument, Slice

MAX_DEPTH = 200
MAX_VALUES = 1_000_000
MAX_VALUE_CHARS = 4000
_JSON_TOKEN = re.compile(r'[\s]*(?:(")|([{}\[\],:])|([^\s{}\[\],:"]+))')


@dataclass(slots=True)
class _Frame:
    """An open JSON container while scanning: its key path and where the scan is in it."""

    is_object: bool
    path: tuple[str, ...]
    index: int = 0  # of the value being read, in an array
    key: str | None = None  # the key of the value about to be read, in an object
    expecting_key: bool = False  # in an object: the next string is a key


@dataclass(frozen=True, slots=True)
class Leaf:
    """One scalar value at a key path with its source line span (1-based)."""

    path: tuple[str, ...]
    value: str
    line_start: int
    line_end: int


class JsonParser:
    """Parser for ``.json`` and JSON Lines (``.jsonl``, ``.ndjson``)."""

    name: ClassVar[str] = "json"
    extensions: ClassVar[tuple[str, ...]] = (".json", ".jsonl", ".ndjson", ".geojson")
    mime_types: ClassVar[tuple[str, ...]] = ("application/json", "application/x-ndjson")

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        text, encoding = decode_text_or_reject(data, path, "JSON")
        with guard(path, "JSON"):
            if PurePath(path).suffix.lower() in (".jsonl", ".ndjson"):
                leaves = list(_json_lines(text, path))
            else:
                leaves = list(json_leaves(text, path))
        return ParsedDocument(
            tuple(group_leaves(leaves)), PurePath(path).stem, {"values": len(leaves)}, encoding
        )


class YamlParser:
    """Parser for ``.yaml`` and ``.yml`` (every document of a multi-document stream)."""

    name: ClassVar[str] = "yaml"
    extensions: ClassVar[tuple[str, ...]] = (".yaml", ".yml")
    mime_types: ClassVar[tuple[str, ...]] = ("application/yaml", "application/x-yaml", "text/yaml")

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        text, encoding = decode_text_or_reject(data, path, "YAML")
        with guard(path, "YAML"):
            leaves = list(yaml_leaves(text, path))
        return ParsedDocument(
            tuple(group_leaves(leaves)), PurePath(path).stem, {"values": len(leaves)}, encoding
        )


def dotted(path: tuple[str, ...]) -> str:
    """``("board", "pins[0]", "name")`` -> ``"board.pins[0].name"``."""
    return ".".join(path)


def group_leaves(leaves: list[Leaf]) -> Iterator[Slice]:
    """Consecutive leaves with the same parent path become one slice."""
    run: list[Leaf] = []
    for leaf in [*leaves, None]:
        if run and (leaf is None or leaf.path[:-1] != run[0].path[:-1]):
            lines = [f"{dotted(x.path) or '(value)'}: {x.value}" for x in run]
            yield Slice(
                "\n".join(lines), run[0].line_start, max(x.line_end for x in run), run[0].path[:-1]
            )
            run = []
        if leaf is not None:
            run.append(leaf)


def _check_budget(count: int, depth: int, path: str) -> None:
    if depth > MAX_DEPTH:
        raise UnsafeFileError(path, f"nested deeper than {MAX_DEPTH} levels: refused")
    if count > MAX_VALUES:
        raise UnsafeFileError(path, f"more than {MAX_VALUES:,} values: refused")


def _show(value: str) -> str:
    value = " ".join(value.split()) if len(value) < 200 else value
    return value if len(value) <= MAX_VALUE_CHARS else value[:MAX_VALUE_CHARS] + " …"


# -- JSON ---------------------------------------------------------------------


def json_leaves(
    text: str, path: str, prefix: tuple[str, ...] = (), first_line: int = 1
) -> Iterator[Leaf]:
    """Validate ``text`` as JSON, then yield its scalar values with line numbers."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(
            path,
            f"not valid JSON: {exc.msg} at line {exc.lineno + first_line - 1}, column {exc.colno}",
        ) from None
    # After validation the token stream is well formed, so a simple scan suffices.
    stack: list[_Frame] = []
    line, pos, count = first_line, 0, 0
    cur: tuple[str, ...] = prefix
    while (m := _JSON_TOKEN.match(text, pos)) is not None and m.end() > pos:
        line += text.count("\n", pos, m.start(1) if m.group(1) else m.end())
        if m.group(1):
            value, end = scanstring(text, m.end())
            line += text.count("\n", m.end(), end)
            pos = end
            frame = stack[-1] if stack else None
            if frame is not None and frame.is_object and frame.expecting_key:
                frame.key, frame.expecting_key = value, False
                continue
            token_value = value
        else:
            pos = m.end()
            punct = m.group(2)
            if punct in ("{", "["):
                _check_budget(count, len(stack) + 1, path)
                is_object = punct == "{"
                stack.append(_Frame(is_object, _child(stack, cur), expecting_key=is_object))
                continue
            if punct in ("}", "]"):
                stack.pop()
                continue
            if punct == ",":
                if stack:
                    stack[-1].index += 1
                    stack[-1].expecting_key = stack[-1].is_object
                continue
            if punct == ":":
                continue
            token_value = m.group(3)
        count += 1
        _check_budget(count, len(stack), path)
        yield Leaf(_child(stack, cur), _show(token_value), line, line)


def _child(stack: list[_Frame], root: tuple[str, ...]) -> tuple[str, ...]:
    """The key path of the value about to be read in the innermost container."""
    if not stack:
        return root
    frame = stack[-1]
    parent, index = frame.path, frame.index
    if frame.is_object:
        return (*parent, str(frame.key))
    if parent:
        return (*parent[:-1], f"{parent[-1]}[{index}]")
    return (f"[{index}]",)


def _json_lines(text: str, path: str) -> Iterator[Leaf]:
    for number, raw in enumerate(text.split("\n"), start=1):
        if raw.strip():
            yield from json_leaves(raw, path, (f"[{number}]",), number)


# -- YAML ---------------------------------------------------------------------


def yaml_leaves(text: str, path: str) -> Iterator[Leaf]:
    """Compose every YAML document and yield scalar leaves; aliases become references."""
    text = normalize_newlines(text)
    try:
        documents = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ParseError(path, f"not valid YAML: {exc.problem or exc.context}{where}") from None
    except yaml.YAMLError as exc:
        raise ParseError(path, f"not valid YAML: {exc}") from None
    seen: dict[int, tuple[str, ...]] = {}
    count = 0
    for number, doc in enumerate(documents):
        prefix = (f"[doc {number + 1}]",) if len(documents) > 1 else ()
        todo: list[tuple[yaml.Node, tuple[str, ...], int]] = [(doc, prefix, 0)]
        while todo:
            node, key_path, depth = todo.pop()
            _check_budget(count, depth, path)
            line = node.start_mark.line + 1
            if isinstance(node, yaml.ScalarNode):
                count += 1
                end = max(line, node.end_mark.line + (node.end_mark.column > 0))
                yield Leaf(key_path, _show(str(node.value)), line, end)
                continue
            if id(node) in seen:
                count += 1
                yield Leaf(key_path, f"*same as {dotted(seen[id(node)]) or '(root)'}", line, line)
                continue
            seen[id(node)] = key_path
            todo.extend(reversed(list(_yaml_children(node, key_path, depth))))


def _yaml_children(
    node: yaml.Node, key_path: tuple[str, ...], depth: int
) -> Iterator[tuple[yaml.Node, tuple[str, ...], int]]:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = str(key.value) if isinstance(key, yaml.ScalarNode) else "?"
            yield value, (*key_path, name), depth + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, value in enumerate(node.value):
            step = f"{key_path[-1]}[{index}]" if key_path else f"[{index}]"
            yield value, (*key_path[:-1], step), depth + 1
