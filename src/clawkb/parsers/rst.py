"""reStructuredText parser: docutils' doctree walked into slices with exact line spans.

docutils parses the source (nothing else: no file is read, no code runs — see
:data:`SETTINGS`) and this module walks the tree once, keeping the section
stack as the heading path. What becomes what:

* a section title is a small heading slice (like Markdown's), so the chunker
  starts the section's chunk at its title and a title with no body is found;
* paragraphs, line blocks, rubrics and footnotes are ``text``; bullet,
  enumerated, definition, field and option lists are one ``list`` slice each;
* literal blocks, ``code``/``code-block``/``sourcecode`` and doctest blocks are
  ``code`` with their language (``.. highlight::`` sets the default for ``::``
  blocks); ``math`` is a ``formula``;
* grid and simple tables, ``list-table`` and ``csv-table`` are ``table``
  slices written as pipe tables whose first row is the header (``thead`` rows,
  else the first row), so table records and the chunker's repeated header work;
  a table caption is a text slice before it;
* admonitions (``note``, ``warning``, Sphinx's ``seealso``, ``versionadded``…)
  are text prefixed with their kind (``Warning: …``);
* roles render as their text (``:c:func:`gpio_config``` -> ``gpio_config``,
  ``:ref:`Title <label>``` -> ``Title``); ``:doc:`` targets become links to the
  ``.rst`` file and ``:ref:`` targets ``ref`` links resolved through the labels
  (``.. _label:``) each document lists in its metadata;
* ``toctree`` entries are a list of links; ``only`` keeps every branch
  and its condition as text (``SOC_ECDSA_SUPPORT_DETERMINISTIC_MODE``);
  ``include``, ``raw`` and file/URL tables are refused by docutils' own
  security settings (never read, never a failure); any other unknown
  directive degrades to its parsed content (diagram directives such as
  ``mermaid`` to a code block), Sphinx domain directives (``c:function``)
  keep their signature as text, and so do directives that pull an API entity
  in by name (``doxygendefine:: ESP_BT_VS_PCA_OCF``, ``autofunction``): the
  generated text is not in the source, the name is.

Line spans come from the doctree (paragraphs and literal blocks carry their
first line; titles their underline) and end where the next element starts,
trimmed of blank lines; text slices keep the source line breaks.
"""

from __future__ import annotations

import io
import re
import threading
from pathlib import PurePath
from typing import TYPE_CHECKING, ClassVar

from clawkb.parsers.safety import guard
from clawkb.text.decode import decode_source
from clawkb.types import Link, ParsedDocument, Slice

if TYPE_CHECKING:
    from docutils import nodes

#: docutils settings: silent (nothing reaches the terminal), no file or raw
#: inclusion, no config files, no title promotion (sections stay sections).
SETTINGS: dict[str, object] = {
    "report_level": 5,
    "halt_level": 5,
    "file_insertion_enabled": False,
    "raw_enabled": False,
    "_disable_config": True,
    "doctitle_xform": False,
    "sectsubtitle_xform": False,
    "docinfo_xform": False,
    "syntax_highlight": "none",
    "smart_quotes": False,
    "embed_stylesheet": False,
    "input_encoding": "unicode",
    "line_length_limit": 100_000,
    "pep_references": False,
    "rfc_references": False,
    "traceback": True,
}
#: Directives whose content is a diagram or other non-RST text: kept as code.
DIAGRAMS = frozenset(
    [
        "mermaid",
        "wavedrom",
        "blockdiag",
        "seqdiag",
        "packetdiag",
        "rackdiag",
        "nwdiag",
        "actdiag",
        "graphviz",
        "graph",
        "digraph",
        "uml",
        "plantuml",
        "ditaa",
        "aafig",
    ]
)
#: Sphinx directives that are admonitions in all but name.
SPHINX_ADMONITIONS = {
    "seealso": "See also",
    "todo": "Todo",
    "versionadded": "New in version",
    "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version",
}
_CODE_DIRECTIVES = ("code-block", "sourcecode", "code")
_EXPLICIT_TITLE = re.compile(r"^(.+?)\s*(?<!\x00)<(.*?)>$", re.S)
_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1+\s*$")
_LOCK = threading.Lock()
_installed = False


class RstParser:
    """Parser for ``.rst`` and ``.rest`` files (docutils)."""

    name: ClassVar[str] = "rst"
    #: .rst files were read by the text parser before this parser existed;
    #: 2: directives that import an API entity by name keep the name; a directive
    #: body written without the blank line is parsed, not dropped
    version: ClassVar[str] = "2"
    extensions: ClassVar[tuple[str, ...]] = (".rst", ".rest")
    mime_types: ClassVar[tuple[str, ...]] = ("text/x-rst", "text/prs.fallenstein.rst")
    #: docutils on untrusted text (deep nesting, huge tables): in the sandboxed worker.
    isolate: ClassVar[bool] = True

    def preload(self) -> None:
        """Import and extend docutils once in the parent (forked workers inherit it)."""
        _install()

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        text, encoding = decode_source(data, path)
        return parse_rst(text, path, encoding)


def parse_rst(text: str, path: str, encoding: str | None = None) -> ParsedDocument:
    """Parse already-decoded reStructuredText."""
    from docutils.core import publish_doctree

    _install()
    settings = {**SETTINGS, "warning_stream": io.StringIO()}
    with guard(path, "reStructuredText"):
        doctree = publish_doctree(text, source_path=path, settings_overrides=settings)
        walker = _Walker(text.split("\n"), path)
        walker.walk(doctree)
    title = walker.first_title or PurePath(path).stem
    metadata: dict[str, object] = {}
    if walker.labels:
        metadata["labels"] = sorted(walker.labels)[:500]
    return ParsedDocument(
        slices=tuple(walker.slices), title=title, metadata=metadata, encoding=encoding
    )


# -- docutils extensions: generic directives and roles -------------------------------


def _install() -> None:
    """Teach docutils (once per process) Sphinx's directives and roles, leniently.

    Unknown directives and roles are not errors: the lookup functions fall back
    to a generic directive (content parsed as RST) and a generic role (its text).
    """
    global _installed, _LINE_TEXT
    with _LOCK:
        if _installed:
            return
        import docutils.core  # noqa: F401 - imported here so forked workers inherit it
        from docutils.parsers.rst import directives, roles

        from clawkb.parsers import rst_docutils as ext

        for name in _CODE_DIRECTIVES:
            directives.register_directive(name, ext.CodeDirective)
        directives.register_directive("highlight", ext.HighlightDirective)
        from docutils.parsers.rst.directives.tables import CSVTable, ListTable, RSTTable

        directives.register_directive("csv-table", ext.lined(CSVTable))
        directives.register_directive("list-table", ext.lined(ListTable))
        directives.register_directive("table", ext.lined(RSTTable))
        directives.register_directive("toctree", ext.TocTreeDirective)
        directives.register_directive("contents", ext.NoOpDirective)
        directives.register_directive("sectnum", ext.NoOpDirective)
        for name, label in SPHINX_ADMONITIONS.items():
            directives.register_directive(name, ext.labelled_admonition(label))
        roles.register_canonical_role("ref", ext.link_role("ref"))
        roles.register_canonical_role("doc", ext.link_role("doc"))
        ext.patch_lookups(DIAGRAMS)
        _LINE_TEXT = _line_text_types()
        _installed = True


# -- the walk ------------------------------------------------------------------------


class _Walker:
    def __init__(self, lines: list[str], path: str) -> None:
        self.lines = lines
        self.path = path
        self.slices: list[Slice] = []
        self.first_title: str | None = None
        self.labels: set[str] = set()
        self.highlight: str | None = None
        self.starts: list[int] = []  # corrected start lines of every node, sorted

    # line bookkeeping ---------------------------------------------------------------

    def walk(self, doctree: nodes.document) -> None:
        from docutils import nodes

        starts = set()
        for node in doctree.findall(nodes.Element):
            if isinstance(node, nodes.system_message):
                continue
            line = self._own_line(node)
            if line is not None:
                starts.add(line)
        self.starts = sorted(starts)
        self._children(doctree, ())

    def _own_line(self, node: nodes.Element) -> int | None:
        """1-based first source line of ``node`` if docutils knows it (titles fixed)."""
        from docutils import nodes

        line = getattr(node, "line", None)
        if not isinstance(line, int) or line < 1:
            return None
        if isinstance(node, nodes.section) or (
            isinstance(node, nodes.title) and isinstance(node.parent, nodes.section)
        ):
            return self._title_start(line)
        return min(line, len(self.lines))

    def _title_start(self, underline: int) -> int:
        """docutils gives a section title the line of its underline: step back."""
        start = max(underline - 1, 1)
        if start >= 2 and _ADORNMENT.match(self.lines[start - 2].strip()):
            start -= 1  # an overline
        return start

    def _first_line(self, node: nodes.Element) -> int | None:
        from docutils import nodes

        best: int | None = None
        for sub in node.findall(nodes.Element):
            if isinstance(sub, nodes.system_message):
                continue
            line = self._own_line(sub)
            if line is not None and (best is None or line < best):
                best = line
        return best

    def _last_known(self, node: nodes.Element) -> int | None:
        from docutils import nodes

        best: int | None = None
        for sub in node.findall(nodes.Element):
            line = self._own_line(sub)
            if line is None or isinstance(sub, nodes.system_message):
                continue
            text: str = sub.astext() if isinstance(sub, _LINE_TEXT) else ""
            extra = text.count("\n")
            if best is None or line + extra > best:
                best = line + extra
        return best

    def _span(self, node: nodes.Element, exact_lines: int | None = None) -> tuple[int, int] | None:
        """``(first, last)`` source lines of a block node."""
        first = self._first_line(node)
        if first is None:
            return None
        if exact_lines is not None:
            return first, min(first + exact_lines - 1, len(self.lines))
        first = self._directive_start(first)
        known = self._last_known(node) or first
        last = self._next_start(known) - 1
        indent = _indent(self.lines[first - 1])
        while last > known and (
            self.lines[last - 1].strip() in ("", "::")
            or _foreign_markup(self.lines[last - 1], indent)
        ):
            last -= 1
        return first, max(last, first)

    def _next_start(self, after: int) -> int:
        import bisect

        i = bisect.bisect_right(self.starts, after)
        return self.starts[i] if i < len(self.starts) else len(self.lines) + 1

    def _directive_start(self, first: int) -> int:
        """Step back from a directive's content to its ``.. name::`` line and options."""
        content_indent = _indent(self.lines[first - 1])
        i = first - 1  # 1-based line above
        while i >= 1:
            line = self.lines[i - 1]
            stripped = line.strip()
            if not stripped or (stripped.startswith(":") and _indent(line) >= 1):
                i -= 1
                continue
            if stripped.startswith("..") and "::" in stripped and _indent(line) < content_indent:
                return i
            break
        return first

    # emitting ------------------------------------------------------------------------

    def _emit(
        self,
        text: str,
        span: tuple[int, int] | None,
        path: tuple[str, ...],
        kind: str = "text",
        language: str | None = None,
        links: tuple[Link, ...] = (),
    ) -> None:
        if not text.strip() or span is None:
            return
        first, last = span
        first = max(1, min(first, len(self.lines)))
        last = max(first, min(last, len(self.lines)))
        self.slices.append(Slice(text, first, last, path, kind, language, links=links))

    def _links(self, node: nodes.Element) -> tuple[Link, ...]:
        from docutils import nodes

        out: list[Link] = []
        for ref in node.findall(nodes.reference):
            kind = ref.get("clawkb_kind")
            target = ref.get("clawkb_target")
            if kind == "doc" and target:
                out.append(Link(target=_doc_target(target), text=ref.astext(), kind="url"))
            elif kind == "ref" and target:
                out.append(Link(target=target.lower(), text=ref.astext(), kind="ref"))
            elif ref.get("refuri") and not kind:
                out.append(Link(target=ref["refuri"], text=ref.astext(), kind="url"))
        return tuple(out)

    # the tree ------------------------------------------------------------------------

    def _children(self, node: nodes.Element, path: tuple[str, ...]) -> None:
        for child in node.children:
            self._block(child, path)

    def _block(self, node: nodes.Node, path: tuple[str, ...]) -> None:
        from docutils import nodes

        from clawkb.parsers import rst_docutils as ext

        if isinstance(node, nodes.section):
            self._section(node, path)
        elif isinstance(node, nodes.target):
            self.labels.update(n.lower() for n in node.get("names", ()))
            if not node.get("refuri"):
                self._children(node, path)
        elif isinstance(node, ext.highlight_marker):
            self.highlight = node.get("language") or None
        elif isinstance(node, nodes.paragraph | nodes.line_block | nodes.rubric):
            text = node.astext()
            self._emit(text, self._span(node, text.count("\n") + 1), path, links=self._links(node))
        elif isinstance(node, nodes.literal_block | nodes.doctest_block):
            self._code(node, path)
        elif isinstance(node, nodes.math_block):
            self._emit(node.astext(), self._span(node), path, kind="formula")
        elif isinstance(node, nodes.table):
            self._table(node, path)
        elif isinstance(node, nodes.Admonition):
            self._admonition(node, path)
        elif isinstance(node, nodes.Sequential):  # all lists, definition/field/option too
            self._list(node, path)
        elif isinstance(node, ext.toctree):
            text = "\n".join(ref.astext() for ref in node.findall(nodes.reference))
            self._emit(text, self._span(node), path, kind="list", links=self._links(node))
        elif isinstance(node, nodes.figure):
            for part in node.children:
                if isinstance(part, nodes.caption | nodes.legend):
                    self._emit(part.astext(), self._span(part), path)
        elif isinstance(node, nodes.footnote | nodes.citation):
            text = " ".join(node.astext().split())
            self._emit(text, self._span(node), path, links=self._links(node))
        elif isinstance(node, nodes.topic | nodes.sidebar):
            self._children(node, path)
        elif isinstance(node, nodes.title):
            self._emit(node.astext(), self._span(node, 1), path)
        elif isinstance(node, nodes.Invisible | nodes.image | nodes.transition | nodes.raw):
            return  # comments, targets, substitution definitions, messages
        elif isinstance(node, nodes.problematic):
            return
        elif isinstance(node, nodes.Element):
            self._children(node, path)  # containers, block quotes, compound, generic

    def _section(self, node: nodes.section, path: tuple[str, ...]) -> None:
        from docutils import nodes

        self.labels.update(n.lower() for n in node.get("names", ()))
        title_node = node.next_node(nodes.title)
        title = " ".join(title_node.astext().split()) if title_node is not None else ""
        inner = (*path, title) if title else path
        if title:
            if self.first_title is None:
                self.first_title = title
            line = self._own_line(title_node) or self._own_line(node)
            underline = title_node.line if isinstance(title_node.line, int) else line
            if line is None:  # a section parsed inside a directive: find its title
                underline = self._find_title(title_node, node)
                line = self._title_start(underline) if underline else None
            if line is not None:
                end = underline if underline and underline >= line else line
                self._emit(title, (line, end), inner, links=self._links(title_node))
        for child in node.children:
            if child is title_node:
                continue
            self._block(child, inner)

    def _find_title(self, title_node: nodes.title, section: nodes.section) -> int | None:
        """The underline line of ``title_node``, searched above the section's first line."""
        raw = " ".join(str(title_node.rawsource or title_node.astext()).split())
        below = self._first_line(section) or len(self.lines)
        for i in range(min(below, len(self.lines)) - 1, max(below - 60, 1) - 1, -1):
            if " ".join(self.lines[i - 1].split()) == raw and _ADORNMENT.match(
                self.lines[i].strip()
            ):
                return i + 1
        return None

    def _code(self, node: nodes.literal_block | nodes.doctest_block, path: tuple[str, ...]) -> None:
        from docutils import nodes

        text = node.astext()
        language = node.get("language") or None
        classes = [c for c in node.get("classes", ()) if c != "code"]
        if language is None and "code" in node.get("classes", ()) and classes:
            language = classes[0]
        if isinstance(node, nodes.doctest_block):
            language = "pycon"
        elif language is None and not node.get("clawkb_code"):
            language = self.highlight
        lines = text.rstrip("\n").count("\n") + 1
        span = self._span(node, lines)
        if span is not None and node.get("clawkb_code"):
            # a directive: the content starts after its header
            first = self._first_line(node) or span[0]
            span = (first, first + lines - 1)
        self._emit(text.rstrip("\n"), span, path, kind="code", language=language)

    def _table(self, node: nodes.table, path: tuple[str, ...]) -> None:
        from docutils import nodes

        caption = node.next_node(nodes.title)
        rows: list[list[str]] = []
        header_rows = 0
        for group in node.findall(nodes.tgroup):
            for part in group.children:
                if not isinstance(part, nodes.thead | nodes.tbody):
                    continue
                for row in part.children:
                    if not isinstance(row, nodes.row):
                        continue
                    cells: list[str] = []
                    for entry in row.children:
                        cell = " ".join(entry.astext().split()).replace("|", "\\|")
                        cells.extend([cell] * (1 + int(entry.get("morecols", 0))))
                    rows.append(cells)
                    if isinstance(part, nodes.thead):
                        header_rows += 1
            break  # one tgroup per table in practice
        span = self._span(node)
        if caption is not None:
            cap_span = self._span(caption, 1)
            self._emit(caption.astext(), cap_span, path)
        if not rows or span is None:
            return
        width = max(len(r) for r in rows)
        rows = [r + [""] * (width - len(r)) for r in rows]
        if header_rows > 1:  # several header rows: joined per column
            merged = [
                " ".join(c for c in col if c) for col in zip(*rows[:header_rows], strict=True)
            ]
            rows = [merged, *rows[header_rows:]]
        lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * width]
        lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        self._emit("\n".join(lines), span, path, kind="table", links=self._links(node))

    def _admonition(self, node: nodes.Element, path: tuple[str, ...]) -> None:
        from docutils import nodes

        first = node.children[0] if node.children else None
        title = first if isinstance(first, nodes.title) else None
        label = node.get("clawkb_label") or (
            title.astext() if title is not None else type(node).__name__.capitalize()
        )
        body = [_render(child) for child in node.children if not isinstance(child, nodes.title)]
        text = f"{label}: " + "\n".join(b for b in body if b)
        self._emit(text, self._span(node), path, links=self._links(node))

    def _list(self, node: nodes.Element, path: tuple[str, ...]) -> None:
        self._emit(_render(node), self._span(node), path, kind="list", links=self._links(node))


def _render(node: nodes.Node, depth: int = 0) -> str:
    """Plain text of a body element: list items as ``- item``, nested lists indented."""
    from docutils import nodes

    pad = "  " * depth
    if isinstance(node, nodes.definition_list):
        out = []
        for item in node.children:
            parts = [c for c in item.children if isinstance(c, nodes.Element)]
            term = " ".join(p.astext() for p in parts if not isinstance(p, nodes.definition))
            desc = "\n".join(
                _render(c, depth + 1) for p in parts if isinstance(p, nodes.definition) for c in p
            )
            out.append(f"{pad}{term}\n{desc}" if desc else f"{pad}{term}")
        return "\n".join(out)
    if isinstance(node, nodes.field_list):
        out = []
        for field in node.children:
            name = field.next_node(nodes.field_name)
            body = field.next_node(nodes.field_body)
            text = " ".join(body.astext().split()) if body is not None else ""
            out.append(f"{pad}{name.astext() if name is not None else ''}: {text}")
        return "\n".join(out)
    if isinstance(node, nodes.option_list):
        out = []
        for item in node.children:
            group = item.next_node(nodes.option_group)
            desc = item.next_node(nodes.description)
            opts = group.astext() if group is not None else ""
            text = " ".join(desc.astext().split()) if desc is not None else ""
            out.append(f"{pad}{opts}  {text}")
        return "\n".join(out)
    if isinstance(node, nodes.Sequential):
        items = []
        for n, item in enumerate(node.children, 1):
            marker = f"{n}." if isinstance(node, nodes.enumerated_list) else "-"
            body = "\n".join(_render(c, depth + 1).lstrip() for c in item.children)
            items.append(f"{pad}{marker} {body}")
        return "\n".join(items)
    if isinstance(node, nodes.Invisible | nodes.system_message | nodes.image):
        return ""
    text = node.astext() if isinstance(node, nodes.Node) else str(node)
    if isinstance(node, nodes.literal_block):
        return text
    return "\n".join(pad + line for line in text.split("\n"))


def _doc_target(target: str) -> str:
    """A ``:doc:`` target as a path: relative to this document, ``.rst`` added."""
    target = target.strip()
    if target.startswith("/"):
        target = target.lstrip("/")
    return target if target.endswith((".rst", ".rest", ".txt")) else f"{target}.rst"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _foreign_markup(line: str, indent: int) -> bool:
    """An explicit-markup line (``.. _label:``, a comment) at or left of the block's indent."""
    return line.lstrip().startswith("..") and _indent(line) <= indent


def _line_text_types() -> tuple[type[nodes.Element], ...]:
    from docutils import nodes

    return (nodes.paragraph, nodes.literal_block, nodes.doctest_block, nodes.line_block)


#: Nodes whose text keeps one line per source line (set by :func:`_install`).
_LINE_TEXT: tuple[type[nodes.Element], ...] = ()
