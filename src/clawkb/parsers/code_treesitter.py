"""Find symbols with tree-sitter grammars from PyPI (``tree-sitter-python`` etc.).

Only the per-language grammar wheels are used: they ship compiled grammars
and never download anything (``tree-sitter-language-pack`` fetches grammars
at run time, which fails offline, so it is not used). When the grammar of a
language is not installed, :func:`find_symbols` returns ``None`` and the
regex fallback runs instead.

Per language, a small table says which node types are definitions (and of
what kind), which are containers whose body holds nested definitions
(classes, impls, namespaces), which merely wrap a definition (decorators,
``export``, ``template<>``) and which are transparent (``#ifdef`` blocks,
``extern "C" {}``). Comments directly above a definition are part of it.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clawkb.parsers.code_symbols import Symbol

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

#: language -> (grammar module, attribute returning the language pointer)
GRAMMARS = {
    "python": ("tree_sitter_python", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "go": ("tree_sitter_go", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "bash": ("tree_sitter_bash", "language"),
}

_FN = "function"
_COMMENTS = frozenset({"comment", "line_comment", "block_comment"})


@dataclass(frozen=True)
class Spec:
    defs: dict[str, str]
    containers: frozenset[str] = frozenset()
    wrappers: frozenset[str] = frozenset()
    transparent: frozenset[str] = frozenset()
    bodies: tuple[str, ...] = ("body",)
    variables: frozenset[str] = field(default_factory=frozenset)


_C_DEFS = {
    "function_definition": _FN,
    "struct_specifier": "struct",
    "union_specifier": "union",
    "enum_specifier": "enum",
    "type_definition": "type",
    "preproc_function_def": "macro",
}
_C_TRANSPARENT = frozenset(
    {
        "preproc_ifdef",
        "preproc_if",
        "preproc_else",
        "preproc_elif",
        "linkage_specification",
        "declaration_list",
    }
)
_JS_DEFS = {
    "function_declaration": _FN,
    "generator_function_declaration": _FN,
    "class_declaration": "class",
    "abstract_class_declaration": "class",
    "method_definition": _FN,
    "interface_declaration": "interface",
    "type_alias_declaration": "type",
    "enum_declaration": "enum",
}
_JS = Spec(
    _JS_DEFS,
    containers=frozenset({"class_declaration", "abstract_class_declaration"}),
    wrappers=frozenset({"export_statement"}),
    transparent=frozenset({"class_body"}),
    variables=frozenset({"lexical_declaration", "variable_declaration"}),
)
SPECS: dict[str, Spec] = {
    "python": Spec(
        {"function_definition": _FN, "class_definition": "class"},
        containers=frozenset({"class_definition"}),
        wrappers=frozenset({"decorated_definition"}),
    ),
    "c": Spec(_C_DEFS, transparent=_C_TRANSPARENT),
    "cpp": Spec(
        {**_C_DEFS, "class_specifier": "class", "namespace_definition": "namespace"},
        containers=frozenset({"class_specifier", "struct_specifier", "namespace_definition"}),
        wrappers=frozenset({"template_declaration"}),
        transparent=_C_TRANSPARENT | {"field_declaration_list", "access_specifier"},
    ),
    "rust": Spec(
        {
            "function_item": _FN,
            "function_signature_item": "signature",
            "struct_item": "struct",
            "enum_item": "enum",
            "union_item": "union",
            "trait_item": "trait",
            "impl_item": "impl",
            "mod_item": "module",
            "macro_definition": "macro",
            "type_item": "type",
        },
        containers=frozenset({"impl_item", "trait_item", "mod_item"}),
        transparent=frozenset({"declaration_list"}),
    ),
    "go": Spec(
        {"function_declaration": _FN, "method_declaration": _FN, "type_declaration": "type"},
    ),
    "javascript": _JS,
    "typescript": _JS,
    "tsx": _JS,
    "bash": Spec({"function_definition": _FN}),
}


@functools.cache
def parser_for(language: str) -> Parser | None:
    """A tree-sitter parser for ``language``, or ``None`` when its grammar is missing."""
    try:
        import tree_sitter

        module_name, attr = GRAMMARS[language]
        module = importlib.import_module(module_name)
        return tree_sitter.Parser(tree_sitter.Language(getattr(module, attr)()))
    except (ImportError, KeyError, AttributeError, ValueError, TypeError):
        return None


def find_symbols(source: bytes, language: str) -> list[Symbol] | None:
    """Symbols of ``source``, or ``None`` if tree-sitter cannot handle ``language``."""
    parser = parser_for(language)
    if parser is None:
        return None
    tree = parser.parse(source)
    out: list[Symbol] = []
    _walk(tree.root_node, (), SPECS[language], language, out)
    return out


def _walk(
    node: Node, parent: tuple[str, ...], spec: Spec, language: str, out: list[Symbol]
) -> None:
    todo = [(node, parent)]
    while todo:
        current, path = todo.pop()
        children = current.named_children
        for index, child in enumerate(children):
            if child.type in spec.transparent:
                todo.append((child, path))
                continue
            for inner, name, kind in _definitions(child, spec, language):
                start = _comment_start(children, index, child)
                sym_parent = path
                if language == "go" and inner.type == "method_declaration":
                    receiver = _go_receiver(inner)
                    sym_parent = (*path, receiver) if receiver else path
                shown = "method" if kind == _FN and sym_parent else kind
                out.append(Symbol(name, shown, start, _end_line(child), sym_parent, kind == _FN))
                if inner.type in spec.containers:
                    body = next(
                        (b for f in spec.bodies if (b := inner.child_by_field_name(f)) is not None),
                        inner,
                    )
                    todo.append((body, (*path, name)))


def _definitions(child: Node, spec: Spec, language: str) -> list[tuple[Node, str, str]]:
    """(definition node, name, kind) for ``child``, unwrapping decorators/exports."""
    inner = child
    for _ in range(3):
        if inner.type not in spec.wrappers:
            break
        candidates = [
            c for c in inner.named_children if c.type in spec.defs or c.type in spec.variables
        ]
        if not candidates:
            return []
        inner = candidates[-1]
    if inner.type in spec.variables:
        return _function_variables(inner)
    kind = spec.defs.get(inner.type)
    if kind is None:
        return []
    specifiers = ("struct_specifier", "union_specifier", "enum_specifier", "class_specifier")
    if inner.type in specifiers and inner.child_by_field_name("body") is None:
        return []  # a use such as `struct foo *p;`, not a definition
    name = _name(inner, language)
    return [(inner, name, kind)] if name else []


def _function_variables(decl: Node) -> list[tuple[Node, str, str]]:
    """``const handler = (req) => {...}``: the variable names a function."""
    out = []
    for d in decl.named_children:
        if d.type != "variable_declarator":
            continue
        value, name = d.child_by_field_name("value"), d.child_by_field_name("name")
        if (
            value is not None
            and name is not None
            and value.type
            in (
                "arrow_function",
                "function_expression",
                "function",
                "generator_function",
            )
        ):
            out.append((d, _text(name), _FN))
    return out


def _name(node: Node, language: str) -> str:
    if node.type == "impl_item":
        target = node.child_by_field_name("type")
        return _text(target) if target is not None else ""
    if node.type == "type_declaration":
        spec = next((c for c in node.named_children if c.type in ("type_spec", "type_alias")), None)
        named = spec.child_by_field_name("name") if spec is not None else None
        return _text(named) if named is not None else ""
    named = node.child_by_field_name("name")
    if named is not None:
        return _text(named)
    declarator = node.child_by_field_name("declarator")
    for _ in range(8):  # C declarators nest: pointer -> function -> identifier
        if declarator is None:
            return ""
        if declarator.type in (
            "identifier",
            "field_identifier",
            "type_identifier",
            "qualified_identifier",
            "operator_name",
            "destructor_name",
        ):
            return _text(declarator)
        declarator = declarator.child_by_field_name("declarator") or next(
            iter(declarator.named_children), None
        )
    return ""


def _go_receiver(node: Node) -> str:
    receiver = node.child_by_field_name("receiver")
    if receiver is None:
        return ""
    for param in receiver.named_children:
        typ = param.child_by_field_name("type")
        if typ is not None:
            return _text(typ).lstrip("*").split("[")[0]
    return ""


def _comment_start(siblings: list[Node], index: int, node: Node) -> int:
    """First line of the comment block directly above ``node`` (or its own line)."""
    start = node.start_point[0]
    k = index - 1
    while k >= 0 and siblings[k].type in _COMMENTS and siblings[k].end_point[0] >= start - 1:
        start = siblings[k].start_point[0]
        k -= 1
    return start + 1


def _end_line(node: Node) -> int:
    row, column = node.end_point
    return max(node.start_point[0] + 1, row + (1 if column > 0 else 0))


def _text(node: Node) -> str:
    return " ".join((node.text or b"").decode("utf-8", "replace").split())
