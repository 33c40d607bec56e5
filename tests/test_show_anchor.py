"""`clawkb show` with hostile or ambiguous anchors: one clear line, never a traceback."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawkb.cli.main import cli
from clawkb.errors import NotFoundError
from clawkb.kb import KnowledgeBase


@pytest.fixture(scope="module")
def kb_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("show")
    docs = root / "docs"
    docs.mkdir()
    body = "\n\n".join(f"## Part {i}\n\nPart {i} is fitted at step {i * 3}." for i in range(60))
    (docs / "parts.md").write_text(f"# Parts\n\n{body}\n", encoding="utf-8")
    home = root / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([str(docs)])
    return home


def _anchors(home: Path) -> list[str]:
    with KnowledgeBase.open(home) as kb:
        return [r[0] for r in kb.conn.execute("SELECT anchor FROM chunks")]


def run(home: Path, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--kb", str(home), "show", *args])


def test_huge_anchor_is_a_one_line_error(kb_home: Path) -> None:
    res = run(kb_home, "a" * 100_000)
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: not an anchor: 'aaaa")
    assert "(100000 characters)" in lines[0] and len(lines[0]) < 300


@pytest.mark.parametrize("bad", ["%", "_", "not an anchor", "0x12", "ab%cd"])
def test_wildcards_and_words_are_not_anchors(kb_home: Path, bad: str) -> None:
    res = run(kb_home, bad)
    assert res.exit_code == 2 and "error: not an anchor" in res.output


def test_ambiguous_prefix_says_so_and_lists_candidates(kb_home: Path) -> None:
    anchors = _anchors(kb_home)
    prefix, count = Counter(a[0] for a in anchors).most_common(1)[0]
    assert count > 1
    res = run(kb_home, prefix)
    assert res.exit_code == 2
    msg = res.output.strip()
    assert msg.startswith(f"error: anchor prefix '{prefix}' is ambiguous: it matches #")
    listed = [a for a in anchors if f"#{a} (" in msg]
    assert len(listed) == min(count, 5) and all(a.startswith(prefix) for a in listed)
    assert "parts.md:" in msg and msg.endswith("give more characters")


def test_unique_prefix_hash_and_case_still_work(kb_home: Path) -> None:
    anchor = _anchors(kb_home)[3]
    for given in (anchor, "#" + anchor, anchor.upper(), anchor[:12]):
        res = run(kb_home, given)
        assert res.exit_code == 0, res.output
        assert f"#{anchor}" in res.output
    with KnowledgeBase.open(kb_home) as kb, pytest.raises(NotFoundError, match="no chunk"):
        kb.chunk("f" * 16 if not anchor.startswith("ffff") else "0" * 16)


def test_anchor_lookups_use_the_anchor_index(kb_home: Path) -> None:
    """Prefix lookups are ranges on the anchor index, never scans of every chunk."""
    anchor = _anchors(kb_home)[0]
    with KnowledgeBase.open(kb_home) as kb:
        traced: list[str] = []
        kb.conn.set_trace_callback(traced.append)
        row = kb.repo.chunk_by_anchor(anchor)
        near = kb.repo.anchors_with_prefix(anchor[:6], 5)
        kb.conn.set_trace_callback(None)
        assert row is not None and row.anchor == anchor
        assert anchor in [a for a, _, _ in near]
        lookups = [sql for sql in traced if "c.anchor" in sql]
        assert len(lookups) == 2
        for sql in lookups:
            plan = [str(r[-1]) for r in kb.conn.execute("EXPLAIN QUERY PLAN " + sql)]
            assert not any(step.startswith("SCAN c") for step in plan), plan
