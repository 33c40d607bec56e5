"""docutils extensions for :mod:`clawkb.parsers.rst`: Sphinx's markup, read leniently.

Imported only when an ``.rst`` file is parsed (docutils is imported here).
None of these directives reads a file or runs anything: they only shape the
doctree (code blocks with their language, toctree links, admonition labels),
and :func:`patch_lookups` makes every unknown directive or role degrade to its
content or text instead of an error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import TYPE_CHECKING

from docutils import nodes, utils
from docutils.parsers.rst import Directive, directives, roles
from docutils.statemachine import StringList

if TYPE_CHECKING:
    from docutils.parsers.rst.states import Inliner
    from docutils.utils import Reporter

#: A role function's answer: the nodes it makes and its error messages.
RoleResult = tuple[list[nodes.Node], list[nodes.system_message]]
#: An option converter (``directives.unchanged``, ``directives.flag``...).
OptionConverter = Callable[[str | None], object]

_EXPLICIT = re.compile(r"^(.*?)\s*<([^<>]*)>\s*$", re.S)


class highlight_marker(nodes.Invisible, nodes.Element):
    """Where ``.. highlight:: lang`` changes the default language of ``::`` blocks."""


class toctree(nodes.General, nodes.Element):
    """A toctree: one line per entry, each a ``doc`` link."""


class _AnyOptions(dict[str, OptionConverter]):
    """An option spec that accepts every option (Sphinx adds many)."""

    def __missing__(self, key: str) -> OptionConverter:
        return directives.unchanged

    def __bool__(self) -> bool:  # docutils parses options only when the spec is truthy
        return True


class LenientDirective(Directive):
    """Takes one optional argument, any options and content (Sphinx adds many options)."""

    optional_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec = _AnyOptions()


class NoOpDirective(LenientDirective):
    """Accepts anything, produces nothing (``contents``, ``sectnum``)."""

    def run(self) -> list[nodes.Node]:
        return []


class CodeDirective(LenientDirective):
    """``code-block``/``sourcecode``/``code``: a literal block with its language."""

    def run(self) -> list[nodes.Node]:
        lines = list(self.content)
        offset = self.content_offset
        while lines and not lines[0].strip():
            lines.pop(0)
            offset += 1
        text = "\n".join(lines).rstrip()
        lang = self.arguments[0].strip().lower() if self.arguments else ""
        node = nodes.literal_block(text, text, clawkb_code=True)
        if lang and lang != "none":
            node["language"] = lang.split()[0]
        node.line = offset + 1
        return [node]


class HighlightDirective(Directive):
    required_arguments = 1
    final_argument_whitespace = True
    option_spec = _AnyOptions()

    def run(self) -> list[nodes.Node]:
        lang = self.arguments[0].strip().lower()
        return [highlight_marker(language="" if lang in ("none", "default") else lang)]


class TocTreeDirective(Directive):
    has_content = True
    option_spec = _AnyOptions()

    def run(self) -> list[nodes.Node]:
        node = toctree()
        node.line = self.lineno
        for entry in self.content:
            entry = entry.strip()
            if not entry:
                continue
            title, target = _split_title(entry)
            if node.children:
                node += nodes.Text("\n")
            node += nodes.reference(entry, title, clawkb_kind="doc", clawkb_target=target)
        return [node] if node.children else []


def labelled_admonition(label: str) -> type[Directive]:
    """A Sphinx admonition-like directive (``seealso``, ``versionadded``…)."""

    class Labelled(LenientDirective):
        def run(self) -> list[nodes.Node]:
            arg = self.arguments[0].strip() if self.arguments else ""
            node = nodes.admonition(clawkb_label=f"{label} {arg}".strip())
            node.line = self.lineno
            if self.content:
                self.state.nested_parse(self.content, self.content_offset, node)
            return [node]

    return Labelled


#: Directive families that document an API entity named by their argument:
#: Breathe (``doxygenfunction``, ``doxygendefine``...) and Sphinx autodoc
#: (``autofunction``, ``automodule``...).
_ENTITY_DIRECTIVES = re.compile(r"^(?:doxygen|auto)[a-z]+$")


def names_entity(name: str) -> bool:
    """True when directive ``name`` (lower case) takes the name of what it documents:
    a domain directive (``c:function``), an API-import directive (:data:`_ENTITY_DIRECTIVES`)
    or Sphinx's ``only`` (its condition)."""
    return ":" in name or name == "only" or bool(_ENTITY_DIRECTIVES.match(name))


def _generic(name: str, diagrams: frozenset[str]) -> type[Directive]:
    class Generic(LenientDirective):
        """An unknown directive: its content parsed as RST (a diagram's kept as code)."""

        def run(self) -> list[nodes.Node]:
            out: list[nodes.Node] = []
            lowered = self.name.lower()
            # a domain object (c:function, py:class) keeps its signature; Sphinx's
            # ``only`` its condition, often a capability macro readers search for; an
            # API entity pulled in by name (Breathe's ``doxygendefine``, autodoc's
            # ``autofunction``) keeps that name, the one place the page spells it
            if names_entity(lowered) and self.arguments:
                para = nodes.paragraph(self.arguments[0], self.arguments[0])
                para.line = self.lineno
                out.append(para)
            if lowered in diagrams:
                text = "\n".join([*self.arguments, *self.content]).strip("\n")
                if not text:
                    return out
                block = nodes.literal_block(text, text, language=lowered, clawkb_code=True)
                block.line = self.content_offset + 1
                return [*out, block]
            content, offset = self.content, self.content_offset
            if not content and not names_entity(lowered) and "\n" in "".join(self.arguments):
                # a directive that takes no argument (ESP-IDF's ``list``) written without
                # the blank line: docutils reads its body as the argument; parse it as
                # the body it is rather than dropping it
                lines = self.arguments[0].split("\n")
                src = self.state_machine.input_lines.source(
                    self.lineno - self.state_machine.input_offset - 1
                )
                content = StringList(
                    lines, items=[(src, self.lineno + i) for i in range(len(lines))]
                )
                offset = self.lineno
            if not content:
                return out
            box = nodes.container()
            # Sphinx's ``only``/tabs may hold whole sections: parse titles too, as
            # Sphinx does, with a fresh title-style memory for the nested text
            memo = self.state.memo
            saved = memo.title_styles, memo.section_level
            memo.title_styles, memo.section_level = [], 0
            try:
                self.state.nested_parse(content, offset, box, match_titles=True)
            finally:
                memo.title_styles, memo.section_level = saved
            return [*out, box]

    Generic.__name__ = f"Generic_{re.sub(r'[^0-9A-Za-z]', '_', name)}"
    return Generic


def link_role(kind: str) -> Callable[..., RoleResult]:
    """``:ref:`` / ``:doc:``: the visible text, plus a link the walker collects."""

    def role(
        name: str,
        rawtext: str,
        text: str,
        lineno: int,
        inliner: Inliner,
        options: dict[str, object] | None = None,
        content: Iterable[str] = (),
    ) -> RoleResult:
        title, target = _split_title(utils.unescape(text))
        return [nodes.reference(rawtext, title, clawkb_kind=kind, clawkb_target=target)], []

    return role


def generic_role(
    name: str,
    rawtext: str,
    text: str,
    lineno: int,
    inliner: Inliner,
    options: dict[str, object] | None = None,
    content: Iterable[str] = (),
) -> RoleResult:
    """Any other role (``:c:func:``, ``:kconfig:``…): its text, explicit title first."""
    title, _ = _split_title(utils.unescape(text))
    return [nodes.literal(rawtext, title)], []


def _split_title(text: str) -> tuple[str, str]:
    """``"Title <target>"`` -> ``("Title", "target")``; ``"~a.b"`` -> ``("b", "a.b")``."""
    text = " ".join(text.split())
    m = _EXPLICIT.match(text)
    if m and m.group(1):
        return m.group(1), m.group(2).strip()
    target = text.lstrip("!")
    if target.startswith("~"):
        target = target[1:]
        return re.split(r"[.:]+", target)[-1] or target, target
    return target, target


_patched = False


def patch_lookups(diagrams: frozenset[str]) -> None:
    """Make docutils' directive and role lookups fall back instead of failing."""
    global _patched
    if _patched:
        return
    find_directive = directives.directive
    find_role = roles.role
    cache: dict[str, type[Directive]] = {}

    def directive(
        name: str, language: ModuleType, document: nodes.document
    ) -> tuple[type[Directive], list[nodes.system_message]]:
        cls, messages = find_directive(name, language, document)
        if cls is not None:
            return cls, messages
        key = name.lower()
        if key not in cache:
            cache[key] = _generic(key, diagrams)
        return cache[key], []

    def role(
        name: str, language: ModuleType, lineno: int, reporter: Reporter
    ) -> tuple[Callable[..., RoleResult], list[nodes.system_message]]:
        fn, messages = find_role(name, language, lineno, reporter)
        if fn is not None:
            return fn, messages
        return generic_role, []

    directives.directive = directive
    roles.role = role
    _patched = True


def lined(base: type[Directive]) -> type[Directive]:
    """A table directive whose table node carries the directive's line (CSV rows have none)."""

    class Lined(base):
        def run(self) -> list[nodes.Node]:
            out: list[nodes.Node] = super().run()
            for node in out:
                if isinstance(node, nodes.table):
                    node.line = self.lineno
                    for sub in node.findall(nodes.Element):
                        if isinstance(sub.line, int) and sub.line < self.lineno:
                            sub.line = None  # CSV cells are parsed out of context
            return out

    Lined.__name__ = f"Lined{base.__name__}"
    return Lined
