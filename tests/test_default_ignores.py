"""Default ignores (minified, generated, vendored files), --include, removal of newly
ignored files, and the exit status of `clawkb index`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from clawkb.cli.main import cli
from clawkb.kb import KnowledgeBase

# A real-looking minified line: what a bundler writes (about 2 % blanks).
MINIFIED = (
    "!function(e,t){'use strict';var n=function(e){return e&&e.nodeType===1},r={};"
    + "".join(f"r.f{i}=function(a,b){{return a+b*{i}+n(a)}};" for i in range(120))
    + "e.minifiedmarker=r}(window,document);\n"
)
HAND_WRITTEN_JS = "// the theme switcher\nfunction toggleTheme(name) {\n  return name;\n}\n"


def _tree(root: Path) -> Path:
    files = {
        "book/intro.md": "# Intro\n\nThe handbook bookintroword starts here.\n",
        "book/长段落.md": "# 中文\n\n"
        + "寄存器配置说明" * 300
        + "\n",  # long line, no spaces: prose
        "theme/highlight.min.js": "var minjsmarker=1;\n",
        "theme/book.js": MINIFIED,
        "theme/switch.js": HAND_WRITTEN_JS,
        "theme/style.min.css": "body{color:red}/*mincssmarker*/\n",
        "theme/book.js.map": '{"version":3,"sources":["sourcemapmarker"]}\n',
        "node_modules/lib/readme.md": "nodemodulesmarker\n",
        "vendor/lib/notes.md": "vendoredmarker\n",
        "dist/out.md": "distmarker\n",
        "build/out.md": "buildmarker\n",
        "package-lock.json": '{"lockfilemarker": 1}\n',
        "Cargo.lock": "cargolockmarker\n",
        "src/app.py": "def appfunction():\n    return 'apppymarker'\n",
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def _run(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--kb", str(home), *args])


def _paths(home: Path) -> set[str]:
    with KnowledgeBase.open(home) as kb:
        return {r[0] for r in kb.conn.execute("SELECT path FROM documents")}


@pytest.fixture()
def docs(tmp_path: Path) -> Path:
    return _tree(tmp_path / "docs")


def test_default_ignores_skip_junk_and_say_why(tmp_path: Path, docs: Path) -> None:
    home = tmp_path / "kb"
    res = _run(home, "index", "--json", str(docs))
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    indexed = {Path(p).relative_to(docs).as_posix() for p in _paths(home)}
    assert indexed == {"book/intro.md", "book/长段落.md", "theme/switch.js", "src/app.py"}
    reasons = {s["path"][len(docs.as_posix()) + 1 :]: s["reason"] for s in report["skipped_files"]}
    assert "minified file" in reasons["theme/highlight.min.js"]
    assert "minified file" in reasons["theme/style.min.css"]
    assert "minified or generated" in reasons["theme/book.js"]
    assert "source map" in reasons["theme/book.js.map"]
    assert "lock file" in reasons["package-lock.json"] and "lock file" in reasons["Cargo.lock"]
    for folder in ("node_modules/", "vendor/", "dist/", "build/"):
        assert folder in reasons, reasons  # one line per folder, not per file
    assert all("--include" in r for r in reasons.values())
    assert report["skipped"] == len(report["skipped_files"])
    # the human report counts them per reason; --verbose lists them
    res = _run(home, "index", str(docs))
    assert "minified file" in res.stderr and "highlight.min.js" not in res.stderr
    res = _run(home, "index", str(docs), "--verbose")
    assert "skipped: " + (docs / "theme" / "highlight.min.js").as_posix() in res.stderr


def test_include_overrides_the_default_ignores(tmp_path: Path, docs: Path) -> None:
    home = tmp_path / "kb"
    res = _run(home, "index", str(docs), "--include", "*.min.js", "--include", "vendor/")
    assert res.exit_code == 0, res.output
    with KnowledgeBase.open(home) as kb:
        assert kb.search("minjsmarker").hits
        assert kb.search("vendoredmarker").hits
        assert not kb.search("nodemodulesmarker").hits
    res = _run(home, "index", str(docs), "--include", "theme/book.js")
    with KnowledgeBase.open(home) as kb:
        assert kb.search("minifiedmarker").hits


def test_files_that_become_ignored_are_removed(tmp_path: Path, docs: Path) -> None:
    home = tmp_path / "kb"
    _run(home, "index", str(docs))
    assert (docs / "src" / "app.py").as_posix() in _paths(home)
    # a new .clawkbignore pattern: the file goes like a deleted one
    (docs / ".clawkbignore").write_text("src/\n")
    res = _run(home, "index", str(docs))
    assert "removed 1" in res.stdout and "unchanged 3" in res.stdout, res.output
    assert (docs / "src" / "app.py").as_posix() not in _paths(home)
    # a new `ignore:` setting
    (home / "config.yaml").write_text("ignore: ['*.js']\n")
    res = _run(home, "index", str(docs))
    assert "removed 1" in res.stdout, res.output
    assert (docs / "theme" / "switch.js").as_posix() not in _paths(home)
    with KnowledgeBase.open(home) as kb:
        assert not kb.search("toggleTheme").hits
        assert not kb.search("apppymarker").hits
        assert kb.search("bookintroword").hits


def test_what_include_let_in_goes_when_the_include_goes(tmp_path: Path, docs: Path) -> None:
    home = tmp_path / "kb"
    _run(home, "index", str(docs), "--include", "*.min.js", "--include", "vendor/")
    assert (docs / "theme" / "highlight.min.js").as_posix() in _paths(home)
    res = _run(home, "index", str(docs))
    assert "removed 2" in res.stdout, res.output
    paths = _paths(home)
    assert (docs / "theme" / "highlight.min.js").as_posix() not in paths
    assert (docs / "vendor" / "lib" / "notes.md").as_posix() not in paths


def test_index_exit_status_says_done_with_failures(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "fine.md").write_text("a fine file\n")
    home = tmp_path / "kb"
    assert _run(home, "index", str(docs)).exit_code == 0
    (docs / "broken.json").write_text('{"unterminated": \n')
    res = _run(home, "index", str(docs))
    assert res.exit_code == 3, res.output
    assert "failed 1" in res.stdout and "failed: " in res.stderr
    res = _run(home, "index", "--json", str(docs))
    assert res.exit_code == 3 and json.loads(res.stdout)["failed"] == 1
    (docs / "broken.json").unlink()
    assert _run(home, "index", str(docs)).exit_code == 0
    # an error that stops the run is 2
    (home / "config.yaml").write_text("follow_symlinks: sideways\n")
    assert _run(home, "index", str(docs)).exit_code == 2


def test_the_one_regex_of_every_default_ignore_decides_as_the_patterns_do() -> None:
    """Discovery tests a path against one regex of all default ignores first (a server
    re-walks the folder on every API write); it must match exactly where one of the
    patterns does."""
    import random

    from clawkb.ingest import discover

    assert discover._DEFAULT_ANY is not None
    names = [p.strip("/").lstrip("*.") or p for p, _ in discover.DEFAULT_IGNORES]
    names += ["src", "docs", "a.md", "x.js", "x.min.js", "lib.min.css", ".github", "main.go"]
    rng = random.Random(5)
    matched = 0
    for _ in range(5000):
        parts = [rng.choice(names) for _ in range(rng.randint(1, 4))]
        rel = "/".join(parts) + ("/" if rng.random() < 0.3 else "")
        one = any(spec.match_file(rel) for spec, _, _ in discover._DEFAULT_SPECS)
        assert (discover._DEFAULT_ANY.match(rel) is not None) == one, rel
        matched += one
    assert 500 < matched < 4500  # both kinds were tried
