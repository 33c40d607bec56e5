"""Jupyter notebooks (``.ipynb``) through nbformat.

* Markdown cells: ATX headings (``#``…) set the heading path for everything
  after them, across cells, like a Markdown file; their paragraphs are text
  slices (a pipe table is a ``table``).
* Code cells: one ``code`` slice with the kernel's language (``kernelspec`` /
  ``language_info``), heading path ``(…, "cell 7")``.
* Outputs: the text of ``stream``, ``execute_result``/``display_data``
  (``text/plain``) and errors (``ename: evalue``), bounded to
  :data:`MAX_OUTPUT_CHARS` per cell and :data:`MAX_OUTPUTS_CHARS` per
  notebook, heading path ``(…, "cell 7 output")``. Images and HTML are skipped.
* Line spans: the lines of the ``.ipynb`` JSON the cell occupies (from its
  ``"cell_type"`` key to the next cell's), so ``show`` opens the right place.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterable
from pathlib import PurePath
from typing import TYPE_CHECKING, ClassVar

from clawkb.errors import ParseError
from clawkb.parsers.safety import guard
from clawkb.text.decode import decode_source
from clawkb.types import ParsedDocument, Slice

if TYPE_CHECKING:
    from nbformat import NotebookNode

MAX_OUTPUT_CHARS = 2_000
MAX_OUTPUTS_CHARS = 100_000
MAX_CELLS = 20_000
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CELL_KEY = re.compile(r'"cell_type"\s*:')
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}")


class NotebookParser:
    """Parser for ``.ipynb`` files (nbformat 4, older versions converted)."""

    name: ClassVar[str] = "notebook"
    extensions: ClassVar[tuple[str, ...]] = (".ipynb",)
    mime_types: ClassVar[tuple[str, ...]] = ("application/x-ipynb+json",)
    requires: ClassVar[tuple[str, ...]] = ("nbformat",)
    extra: ClassVar[str] = "formats"
    #: nbformat + jsonschema on untrusted JSON: parsed in the sandboxed worker.
    isolate: ClassVar[bool] = True

    def preload(self) -> None:
        """Import nbformat (and jsonschema) once in the parent; forked workers inherit it."""
        with contextlib.suppress(ImportError):
            import nbformat  # noqa: F401

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        from clawkb.errors import MissingDependencyError

        try:
            import nbformat
        except ImportError:
            raise MissingDependencyError(f"{path}: Jupyter notebooks", "formats") from None
        text, encoding = decode_source(data, path)
        with guard(path, "Jupyter notebook"), warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")  # nbformat's warnings go to the document, not stderr
            captured: dict[str, object] = {}
            nb = nbformat.reads(text, as_version=4, capture_validation_error=captured)
        cells = list(nb.get("cells") or [])
        if not isinstance(nb.get("cells"), list):
            raise ParseError(path, "not a Jupyter notebook: no cell list")
        if len(cells) > MAX_CELLS:
            raise ParseError(path, f"{len(cells)} cells (limit {MAX_CELLS})")
        builder = _Builder(text.split("\n"), len(cells), _language(nb))
        for number, cell in enumerate(cells, 1):
            builder.cell(number, cell)
        notes = ["notebook does not validate against its schema"] if captured else []
        notes += sorted({str(w.message).split(".")[0][:120] for w in seen})
        meta = {"cells": len(cells), "language": builder.language}
        title = builder.first_heading or PurePath(path).stem
        return ParsedDocument(tuple(builder.slices), title, meta, encoding, tuple(notes))


def _language(nb: NotebookNode) -> str | None:
    meta = nb.get("metadata") or {}
    for key in ("kernelspec", "language_info"):
        section = meta.get(key) or {}
        lang = section.get("language") or (section.get("name") if key == "language_info" else None)
        if isinstance(lang, str) and lang:
            return lang.lower()
    return None


class _Builder:
    def __init__(self, lines: list[str], n_cells: int, language: str | None) -> None:
        self.language = language
        starts = [i + 1 for i, line in enumerate(lines) if _CELL_KEY.search(line)]
        self.starts = starts if len(starts) == n_cells else []
        self.n_lines = len(lines)
        self.stack: list[tuple[int, str]] = []
        self.slices: list[Slice] = []
        self.first_heading: str | None = None
        self.output_budget = MAX_OUTPUTS_CHARS

    def span(self, number: int) -> tuple[int, int]:
        if not self.starts:
            return 1, max(self.n_lines, 1)
        first = self.starts[number - 1]
        last = self.starts[number] - 1 if number < len(self.starts) else self.n_lines
        return first, max(first, last)

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(t for _, t in self.stack)

    def cell(self, number: int, cell: NotebookNode) -> None:
        kind = cell.get("cell_type")
        source = cell.get("source") or ""
        if isinstance(source, list):
            source = "".join(str(s) for s in source)
        source = str(source)
        first, last = self.span(number)
        if kind == "markdown":
            self._markdown(source, first, last)
        elif kind == "code":
            label = f"cell {number}"
            if source.strip():
                self.slices.append(
                    Slice(source.rstrip(), first, last, (*self.path, label), "code", self.language)
                )
            out = self._outputs(cell.get("outputs") or [])
            if out:
                self.slices.append(Slice(out, first, last, (*self.path, f"{label} output")))
        elif source.strip():  # raw cells
            self.slices.append(Slice(source.rstrip(), first, last, self.path))

    def _markdown(self, source: str, first: int, last: int) -> None:
        block: list[str] = []

        def flush() -> None:
            if any(line.strip() for line in block):
                table = len(block) > 1 and block[0].lstrip().startswith("|")
                table = table and bool(_TABLE_SEP.match(block[1]))
                text = "\n".join(block).strip("\n")
                self.slices.append(
                    Slice(text, first, last, self.path, "table" if table else "text")
                )
            block.clear()

        for line in source.split("\n"):
            m = _HEADING.match(line)
            if m:
                flush()
                level, title = len(m.group(1)), m.group(2).strip()
                while self.stack and self.stack[-1][0] >= level:
                    self.stack.pop()
                if title:
                    self.stack.append((level, title))
                    self.first_heading = self.first_heading or title
                    self.slices.append(Slice(title, first, last, self.path))
            elif not line.strip():
                flush()
            else:
                block.append(line)
        flush()

    def _outputs(self, outputs: Iterable[object]) -> str:
        parts: list[str] = []
        for out in outputs:
            if not isinstance(out, dict):
                continue
            kind = out.get("output_type")
            text: object = ""
            if kind == "stream":
                text = out.get("text", "")
            elif kind in ("execute_result", "display_data"):
                text = (out.get("data") or {}).get("text/plain", "")
            elif kind == "error":
                text = f"{out.get('ename', '')}: {out.get('evalue', '')}"
            if isinstance(text, list):
                text = "".join(str(t) for t in text)
            if str(text).strip():
                parts.append(str(text).rstrip())
        joined = "\n".join(parts)
        room = min(MAX_OUTPUT_CHARS, self.output_budget)
        if len(joined) > room:
            joined = joined[:room].rstrip() + "\n[output truncated]"
        self.output_budget -= len(joined)
        return joined if self.output_budget >= 0 else ""
