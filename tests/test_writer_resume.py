"""A KB that writes again resumes on the index it published, unless anything changed.

A server's writer thread writes after every API call; opening the writable
index afresh each time mapped every segment again. It now resumes on the
generation it published and held, but only while that is still the current one
and its files still match the manifest: another process's write, or a damaged
file, makes it open the index afresh as before.
"""

from __future__ import annotations

from pathlib import Path

from clawkb.kb import KnowledgeBase
from kb_helpers import build_kb


def _doc(word: str) -> str:
    return f"# Note\n\nThe board keeps {word} in its second bank.\n"


def _top(kb: KnowledgeBase, word: str) -> str:
    hits = kb.search(word, limit=3).hits
    return hits[0].anchor.path.rsplit("/", 1)[-1] if hits else ""


def test_a_second_write_resumes_on_the_index_it_published(tmp_path: Path) -> None:
    home, docs = build_kb(tmp_path, {"a.md": _doc("alphaword"), "b.md": _doc("betaword")})
    with KnowledgeBase.open(home) as kb:
        (docs / "c.md").write_text(_doc("gammaword"), "utf-8")
        kb.index([docs])
        first = kb.lexical
        (docs / "d.md").write_text(_doc("deltaword"), "utf-8")
        (docs / "a.md").unlink()
        kb.index([docs])
        assert kb.lexical is first  # resumed, not opened again
        assert _top(kb, "deltaword") == "d.md" and _top(kb, "gammaword") == "c.md"
        assert _top(kb, "alphaword") == ""
    with KnowledgeBase.open(home) as fresh:  # what it published is what a reader opens
        assert _top(fresh, "deltaword") == "d.md" and _top(fresh, "alphaword") == ""


def test_another_writer_in_between_makes_it_open_afresh(tmp_path: Path) -> None:
    home, docs = build_kb(tmp_path, {"a.md": _doc("alphaword")})
    other_docs = tmp_path / "other"
    other_docs.mkdir()
    with KnowledgeBase.open(home) as kb:
        (docs / "b.md").write_text(_doc("betaword"), "utf-8")
        kb.index([docs])
        first = kb.lexical
        (other_docs / "o.md").write_text(_doc("omegaword"), "utf-8")
        with KnowledgeBase.open(home) as other:  # a terminal `clawkb index` meanwhile
            other.index([other_docs])
        (docs / "c.md").write_text(_doc("gammaword"), "utf-8")
        kb.index([docs])
        assert kb.lexical is not first
        # nothing the other writer published is lost by this one's write
        assert _top(kb, "omegaword") == "o.md" and _top(kb, "gammaword") == "c.md"
    with KnowledgeBase.open(home) as fresh:
        assert _top(fresh, "omegaword") == "o.md" and _top(fresh, "betaword") == "b.md"


def test_a_file_damaged_between_writes_is_found_by_the_next_write(tmp_path: Path) -> None:
    home, docs = build_kb(tmp_path, {"a.md": _doc("alphaword"), "b.md": _doc("betaword")})
    lex = home / "index" / "lexical"
    with KnowledgeBase.open(home) as kb:
        (docs / "c.md").write_text(_doc("gammaword"), "utf-8")
        kb.index([docs])
        first = kb.lexical
        victim = next(p for p in sorted(lex.glob("seg-*/terms.npy")))
        data = bytearray(victim.read_bytes())
        data[len(data) // 2] ^= 0xFF  # same size, other bytes
        victim.write_bytes(bytes(data))
        (docs / "d.md").write_text(_doc("deltaword"), "utf-8")
        kb.index([docs])
        assert kb.lexical is not first
        assert any("rebuilt the lexical index" in r for r in kb.repairs), kb.repairs
        for word, name in [("alphaword", "a.md"), ("gammaword", "c.md"), ("deltaword", "d.md")]:
            assert _top(kb, word) == name
