"""Layering guards over the package source.

* SQL lives in ``clawkb.store``: no module elsewhere runs a statement on a
  connection or carries an SQL statement string; feature packages call the
  typed functions of ``store/*_repo.py``, ``store/repo.py``, ``store/db.py``
  and ``store/pragmas.py`` instead.
* No package imports another package's private (``_name``) names.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "clawkb"
STORE = PACKAGE / "store"

#: A statement run on a connection or cursor.
EXECUTE = re.compile(r"\.(execute|executemany|executescript)\s*\(")
#: A string literal that starts like an SQL statement (keyword, then a space).
SQL_STRING = re.compile(
    r"""[rfbu]{0,2}["'](?:SELECT|INSERT|UPDATE|DELETE|PRAGMA|BEGIN|COMMIT|ROLLBACK|CREATE"""
    r"""|DROP|ALTER|SAVEPOINT|RELEASE|VACUUM|WITH\s+\w+\s+AS)\b[ (]"""
)

#: Modules outside store/ allowed to run SQL, each with the reason it cannot move.
#: Keep this empty: every entry is a layering debt.
ALLOWED: dict[str, str] = {}


def _outside_store() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if STORE not in p.parents)


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def test_the_guards_see_the_package() -> None:
    files = _outside_store()
    assert len(files) > 50, "the source walk found too few modules"
    assert any(EXECUTE.search(p.read_text("utf-8")) for p in STORE.glob("*.py"))
    assert any(SQL_STRING.search(p.read_text("utf-8")) for p in STORE.glob("*.py"))


def test_patterns_catch_sql() -> None:
    assert EXECUTE.search('conn.execute("SELECT 1")')
    assert EXECUTE.search("kb.conn.executemany(q, rows)")
    assert SQL_STRING.search('q = "SELECT id FROM chunks"')
    assert SQL_STRING.search("f'DELETE FROM links WHERE doc_id = ?'")
    assert SQL_STRING.search('"PRAGMA integrity_check"')
    assert not SQL_STRING.search('"Select a board"')
    assert not SQL_STRING.search('help="update the index"')


def test_no_sql_outside_store() -> None:
    found = []
    for path in _outside_store():
        rel = _rel(path)
        if rel in ALLOWED:
            continue
        for no, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if EXECUTE.search(line) or SQL_STRING.search(line):
                found.append(f"{rel}:{no}: {line.strip()}")
    assert not found, "SQL outside clawkb/store (move it into a store/*_repo.py function):\n" + (
        "\n".join(found)
    )


def test_allow_list_is_not_stale() -> None:
    for rel in ALLOWED:
        text = (PACKAGE / rel).read_text("utf-8")
        assert EXECUTE.search(text) or SQL_STRING.search(text), f"{rel} no longer needs its entry"


def _package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "clawkb" else parts[0]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_private_imports_across_packages() -> None:
    found = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        here = _package_of(".".join(rel.parts))
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not node.module or node.level:
                continue
            if not node.module.startswith("clawkb") or _package_of(node.module) == here:
                continue
            private = [a.name for a in node.names if _private(a.name)]
            private += [p for p in node.module.split(".") if _private(p)]
            if private:
                found.append(f"{_rel(path)}: from {node.module} import {', '.join(private)}")
    assert not found, "private names imported from another package:\n" + "\n".join(found)


def _runtime_imports(path: Path) -> set[str]:
    """Modules ``path`` imports when it runs (``if TYPE_CHECKING:`` blocks left out)."""
    tree = ast.parse(path.read_text("utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_one_pipeline_over_the_source_seam() -> None:
    """The pipeline takes a Source, not a KB: retrieve/ never reaches a backend, and the
    pipeline and its sources do not import the KB facade or the knowledge stages (those
    wrap the pipeline from ``KnowledgeBase.run_prepared``)."""
    retrieve = PACKAGE / "retrieve"
    bad = [
        f"{_rel(p)}: {m}"
        for p in retrieve.glob("*.py")
        for m in _runtime_imports(p)
        if m.startswith("clawkb.backends")
        or (
            p.name in ("pipeline.py", "source.py")
            and (m == "clawkb.kb" or m.startswith("clawkb.knowledge"))
        )
    ]
    assert not bad, "retrieve/ imports above the seam:\n" + "\n".join(bad)
    runs = [
        _rel(p)
        for folder in (retrieve, PACKAGE / "backends")
        for p in folder.glob("*.py")
        if re.search(r"^def run\(", p.read_text("utf-8"), re.M)
    ]
    assert runs == ["retrieve/pipeline.py"]
