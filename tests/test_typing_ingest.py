"""The ingest side of the tree (parsers, ingest, text) is typed without ``Any``.

Parsed values get real types there: the libraries' node types, protocols for
duck-typed objects, ``object`` plus narrowing where a value is really unknown.
This guard keeps it so; it reads annotations (not text), so ``dict[str, Any]``
and ``**kwargs: Any`` count as well as ``x: Any``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import clawkb

PACKAGE = Path(clawkb.__file__).parent
FOLDERS = ("parsers", "ingest", "text")


def _names_any(node: ast.AST | None) -> bool:
    if node is None:
        return False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == "Any":
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "Any":
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                inner = ast.parse(sub.value, mode="eval")
            except SyntaxError:
                continue
            if _names_any(inner):
                return True
    return False


def any_annotations(source: str, name: str = "<string>") -> list[str]:
    """``file:line`` of every annotation (or ``typing.Any`` import) naming ``Any``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        annotations: list[ast.expr | None] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            annotations += [p.annotation for p in params if p is not None]
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module == "typing"
            and any(alias.name == "Any" for alias in node.names)
        ):
            found.append(f"{name}:{node.lineno}")
        if any(_names_any(a) for a in annotations):
            found.append(f"{name}:{getattr(node, 'lineno', 0)}")
    return found


def test_the_guard_sees_any() -> None:
    planted = (
        "from typing import Any\n"
        "def f(x: Any, **kw: 'dict[str, Any]') -> None: ...\n"
        "y: list[Any] = []\n"
        "def g(x: object) -> int: ...\n"
    )
    assert any_annotations(planted) == ["<string>:1", "<string>:2", "<string>:3"]


def test_no_any_on_the_ingest_side() -> None:
    files = [f for folder in FOLDERS for f in sorted((PACKAGE / folder).rglob("*.py"))]
    assert len(files) > 30  # the guard looks at the real package
    found = [
        hit
        for f in files
        for hit in any_annotations(f.read_text("utf-8"), str(f.relative_to(PACKAGE)))
    ]
    assert found == []


def test_no_bare_any_anywhere_in_src() -> None:
    """Issue 21's budget (``grep ": Any\\|-> Any"`` over src) is spent: no bare ``Any``
    parameter, attribute or return is left. ``dict[str, Any]`` outside the ingest side
    is still allowed; this keeps the bare form from coming back."""
    bare = re.compile(r":\s*Any\b|->\s*Any\b")
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 150
    found = [
        f"{f.relative_to(PACKAGE)}:{n}"
        for f in files
        for n, line in enumerate(f.read_text("utf-8").splitlines(), 1)
        if bare.search(line)
    ]
    assert found == []
