"""A changed parser (or parser version, or chunker version) re-parses unchanged files once.

Real KBs on real files: the "older clawkb" is simulated either by indexing with
the registry an older release had (``.rst`` read by the text parser), by
rewriting the recorded versions in the real SQLite file, by taking the store
back to before the migration that records them, or by a real plugin
distribution whose parser version is bumped between two ``clawkb index`` runs.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import ClassVar

import pytest

from clawkb.errors import ParseError
from clawkb.ingest.chunker import CHUNKER_VERSION
from clawkb.ingest.pipeline import IndexReport, Ingestor
from clawkb.kb import KnowledgeBase
from clawkb.parsers.compressed import CompressedParser
from clawkb.parsers.html import HtmlParser
from clawkb.parsers.registry import ParserRegistry
from clawkb.parsers.rst import RstParser
from clawkb.parsers.text import TextParser
from clawkb.store.db import DB_NAME
from clawkb.types import ParsedDocument, Slice
from plugin_helpers import clawkb, install_dist

RST = (
    "Power supply\n"
    "============\n"
    "\n"
    "The board takes 5 V from USB.\n"
    "\n"
    "Decoupling\n"
    "----------\n"
    "\n"
    "Place 100 nF next to every VDD pin, word quillfern.\n"
)
FILES = {
    "power.rst": RST,
    "guide.md": "# Guide\n\nBring-up steps, word amberwick.\n",
    "notes.txt": "Notes\n\nUART at 115200 baud, word saltmoth.\n",
}


class _LegacyText(TextParser):
    """The text parser as it was before reStructuredText had its own parser."""

    extensions: ClassVar[tuple[str, ...]] = (".txt", ".text", ".log", ".rst")


def _tree(root: Path) -> Path:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def _index_with(kb: KnowledgeBase, registry: ParserRegistry, root: Path) -> IndexReport:
    with kb.writer():
        return Ingestor(kb.repo, kb.lexical, kb.config, registry).index_paths([root])


def _docs(home: Path) -> dict[str, tuple[str, str | None, str | None]]:
    conn = sqlite3.connect(home / DB_NAME)
    try:
        rows = conn.execute("SELECT path, parser, parser_version, chunker_version FROM documents")
        return {Path(p).name: (n, v, c) for p, n, v, c in rows}
    finally:
        conn.close()


def _chunks(home: Path, name: str) -> list[tuple[str, str]]:
    conn = sqlite3.connect(home / DB_NAME)
    try:
        rows = conn.execute(
            "SELECT c.heading_path, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id"
            " WHERE d.path LIKE ? ORDER BY c.ordinal",
            (f"%/{name}",),
        )
        return [(h, t) for h, t in rows]
    finally:
        conn.close()


def _sql(home: Path, *statements: str) -> None:
    conn = sqlite3.connect(home / DB_NAME)
    try:
        for stmt in statements:
            conn.execute(stmt)
        conn.commit()
    finally:
        conn.close()


def test_rst_read_as_text_by_an_older_release_is_reparsed_once(tmp_path: Path) -> None:
    docs, home = _tree(tmp_path / "docs"), tmp_path / "kb"
    legacy = ParserRegistry()
    legacy.register(_LegacyText())
    with KnowledgeBase.open(home, create=True) as kb:
        first = _index_with(kb, legacy, docs)
        assert (first.added, first.reparsed) == (3, 0)
    assert _docs(home)["power.rst"] == ("text", "1", CHUNKER_VERSION)
    before = _chunks(home, "power.rst")
    assert all(h == "[]" for h, _ in before)  # plain paragraphs: no sections

    with KnowledgeBase.open(home) as kb:
        rep = kb.index([docs])
        assert (rep.updated, rep.unchanged, rep.added, rep.reparsed) == (1, 2, 0, 1)
        assert rep.reparse_summary() == "re-parsed 1 file: parser changed (rst 1)"
        hit = kb.search("quillfern", limit=1).hits[0]
        assert hit.anchor.heading_path == ("Power supply", "Decoupling")
    assert _docs(home)["power.rst"] == ("rst", RstParser.version, CHUNKER_VERSION)
    assert _chunks(home, "power.rst") != before

    with KnowledgeBase.open(home) as kb:
        again = kb.index([docs])
        assert (again.updated, again.unchanged, again.reparsed) == (0, 3, 0)
        assert again.reparse_summary() is None


def test_store_from_before_the_migration_reparses_everything_once(tmp_path: Path) -> None:
    docs, home = _tree(tmp_path / "docs"), tmp_path / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([docs])
    ids = _chunk_ids(home)
    # Take the real file back to the schema of the release before versions were recorded.
    _sql(
        home,
        "ALTER TABLE documents DROP COLUMN parser_version",
        "ALTER TABLE documents DROP COLUMN chunker_version",
        "DELETE FROM migrations WHERE name = '0008_parser_versions'",
        "UPDATE meta SET value = '7' WHERE key = 'schema_version'",
    )
    with KnowledgeBase.open(home) as kb:  # migrates: the versions are unknown (NULL)
        assert set(_docs(home).values()) == {
            ("rst", None, None),
            ("markdown", None, None),
            ("text", None, None),
        }
        rep = kb.index([docs])
        assert (rep.updated, rep.unchanged, rep.reparsed) == (3, 0, 3)
        assert rep.reparsed_by == {"rst": 1, "markdown": 1, "text": 1}
        assert kb.search("saltmoth", limit=1).hits  # still searchable after the swap
    assert _docs(home)["guide.md"][1:] == ("2", CHUNKER_VERSION)
    # the chunks were stored again (new rows), not only relabelled
    assert all(set(c).isdisjoint(ids[n]) for n, c in _chunk_ids(home).items())
    with KnowledgeBase.open(home) as kb:
        assert kb.index([docs]).reparsed == 0


def _chunk_ids(home: Path) -> dict[str, list[int]]:
    conn = sqlite3.connect(home / DB_NAME)
    try:
        out: dict[str, list[int]] = {}
        for path, cid in conn.execute(
            "SELECT d.path, c.id FROM chunks c JOIN documents d ON d.id = c.doc_id"
        ):
            out.setdefault(Path(path).name, []).append(cid)
        return out
    finally:
        conn.close()


class _Notes:
    """A plugin parser for ``.note`` files; each version slices differently."""

    name: ClassVar[str] = "notes"
    extensions: ClassVar[tuple[str, ...]] = (".note",)
    mime_types: ClassVar[tuple[str, ...]] = ()

    def __init__(self, version: str | None, *, fail: bool = False) -> None:
        if version is not None:
            self.version = version
        self.fail = fail

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        if self.fail:
            raise ParseError(path, "this parser version cannot read it")
        lines = data.decode().splitlines()
        tag = f"v{getattr(self, 'version', '-')}"
        return ParsedDocument(
            slices=tuple(Slice(f"{tag} {ln}", i + 1, i + 1) for i, ln in enumerate(lines)),
            title=tag,
        )


def _notes_registry(parser: _Notes) -> ParserRegistry:
    registry = ParserRegistry()
    registry.register(parser)
    return registry


def test_plugin_version_bump_reparses_and_a_failure_keeps_the_old_chunks(tmp_path: Path) -> None:
    docs, home = tmp_path / "docs", tmp_path / "kb"
    docs.mkdir()
    (docs / "a.note").write_text("alpha line\n", encoding="utf-8")
    (docs / "b.note").write_text("beta line\n", encoding="utf-8")
    with KnowledgeBase.open(home, create=True) as kb:
        # a plugin without a version keeps working: recorded as "1", never re-parsed
        assert _index_with(kb, _notes_registry(_Notes(None)), docs).added == 2
        assert _docs(home)["a.note"] == ("notes", "1", CHUNKER_VERSION)
        assert _index_with(kb, _notes_registry(_Notes("1")), docs).unchanged == 2

        # version 2 cannot read the files: both fail, their old chunks stay searchable
        bad = _index_with(kb, _notes_registry(_Notes("2", fail=True)), docs)
        assert (bad.failed, bad.updated, bad.reparsed) == (2, 0, 0)
        assert "cannot read it" in bad.errors[0][1]
        assert [t for _, t in _chunks(home, "a.note")] == ["v- alpha line"]
        assert _docs(home)["a.note"][1] == "1"

        rep = _index_with(kb, _notes_registry(_Notes("2")), docs)
        assert (rep.updated, rep.reparsed, rep.failed) == (2, 2, 0)
        assert rep.reparse_summary() == "re-parsed 2 files: parser changed (notes 2)"
        assert [t for _, t in _chunks(home, "a.note")] == ["v2 alpha line"]
        assert kb.search("alpha", limit=1).hits[0].text == "v2 alpha line"

        again = _index_with(kb, _notes_registry(_Notes("2")), docs)
        assert (again.unchanged, again.reparsed) == (2, 0)


def test_changed_file_with_a_new_parser_is_an_update_not_a_reparse(tmp_path: Path) -> None:
    docs, home = tmp_path / "docs", tmp_path / "kb"
    docs.mkdir()
    (docs / "a.note").write_text("alpha\n", encoding="utf-8")
    with KnowledgeBase.open(home, create=True) as kb:
        _index_with(kb, _notes_registry(_Notes("1")), docs)
        (docs / "a.note").write_text("alpha changed\n", encoding="utf-8")
        rep = _index_with(kb, _notes_registry(_Notes("2")), docs)
        assert (rep.updated, rep.reparsed) == (1, 0)
        assert [t for _, t in _chunks(home, "a.note")] == ["v2 alpha changed"]


def test_compressed_version_names_the_inner_parser() -> None:
    parser = CompressedParser()
    assert parser.version_for("/d/guide.rst.gz") == f"1+rst:{RstParser.version}"
    assert parser.version_for("/d/page.html.xz") == f"1+html:{HtmlParser.version}"
    assert parser.version_for("/d/copyright.gz") == "1+text:1"  # extensionless: text


NOTE_PLUGIN = """
from clawkb.types import ParsedDocument, Slice

class NoteParser:
    name = "noteplug"
    extensions = (".note",)
    mime_types = ()
    version = "{version}"

    def parse(self, data, path):
        text = data.decode()
        return ParsedDocument(slices=(Slice("{version}: " + text.strip(), 1, 1),))
"""


def test_cli_reports_the_reparse_of_a_bumped_plugin(tmp_path: Path) -> None:
    site, docs, home = tmp_path / "site", tmp_path / "docs", tmp_path / "kb"
    docs.mkdir()
    (docs / "x.note").write_text("kelpstone\n", encoding="utf-8")
    (docs / "y.txt").write_text("plain text file\n", encoding="utf-8")

    def install(version: str) -> dict[str, str]:
        return install_dist(
            site,
            "noteplug",
            "0.1",
            {"noteplug": NOTE_PLUGIN.format(version=version)},
            "[clawkb.parsers]\nnote = noteplug:NoteParser\n",
        )

    env = install("1")
    first = clawkb(env, "--kb", str(home), "index", str(docs))
    assert first.returncode == 0, first.stderr
    assert "re-parsed" not in first.stdout
    env = install("2")
    res = clawkb(env, "--kb", str(home), "index", str(docs))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[0] == "re-parsed 1 file: parser changed (noteplug 1)"
    assert lines[1].startswith("added 0 · updated 1 · removed 0 · unchanged 1 ·")
    assert _chunks(home, "x.note")[0][1] == "2: kelpstone"
    js = clawkb(env, "--kb", str(home), "index", str(docs), "--json")
    report = json.loads(js.stdout)
    assert (report["reparsed"], report["unchanged"], report["reparsed_by"]) == (0, 2, {})


@pytest.mark.parametrize("reparsed", [0, 3])
def test_serve_and_watch_lines_mention_a_reparse(reparsed: int) -> None:
    from clawkb.cli.serving import _report_line

    rep = IndexReport(updated=3, reparsed=reparsed, reparsed_by={"rst": reparsed})
    line = _report_line(rep.to_dict())
    assert ("re-parsed 3 unchanged file(s): parser changed" in line) == bool(reparsed)
