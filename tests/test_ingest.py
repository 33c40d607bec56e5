"""Incremental indexing of a real folder: added / unchanged / updated / removed, ignores, anchors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clawkb.kb import KnowledgeBase

FILES = {
    "guide.md": (
        "# 电源设计指南\n"
        "\n"
        "本文介绍 buck 转换器 的 布局 要点, keyword quartzlemon.\n"
        "\n"
        "## 去耦电容\n"
        "\n"
        "每个 VDD 引脚 放置 100nF 电容, the marker is zincharbor.\n"
    ),
    "notes.txt": "Board bring-up notes\n\nUART console at 115200 baud, word velvetorbit.\n",
    "mixed.md": "# Clock tree\n\n时钟 配置 使用 PLL, sentinel amberquill.\n",
    "sub/deep.md": "# 子目录\n\nNested file with the word copperfinch.\n",
    "sub/plain.txt": "第一行\n第二行 sapphirewren\n",
}


def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def bump_mtime(path: Path, seconds: int = 10) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 1_000_000_000))


def paths_found(kb: KnowledgeBase, query: str) -> list[str]:
    return [h.anchor.path for h in kb.search(query, limit=20).hits]


@pytest.fixture()
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    write_tree(root, FILES)
    return root


@pytest.fixture()
def kb(tmp_path: Path):
    with KnowledgeBase.open(tmp_path / "kb", create=True) as k:
        yield k


def test_first_run_adds_then_rerun_is_unchanged(kb: KnowledgeBase, docs: Path) -> None:
    first = kb.index([docs])
    assert (first.added, first.updated, first.removed, first.failed) == (len(FILES), 0, 0, 0)
    assert first.chunks_added >= len(FILES)
    assert kb.status()["documents"] == len(FILES)

    second = kb.index([docs])
    assert second.unchanged == len(FILES)
    assert (second.added, second.updated, second.removed, second.chunks_added) == (0, 0, 0, 0)


def test_edit_two_files_updates_exactly_two(kb: KnowledgeBase, docs: Path) -> None:
    kb.index([docs])
    (docs / "notes.txt").write_text(
        "Board notes\n\nnow the console says marigoldtide.\n", encoding="utf-8"
    )
    (docs / "sub/plain.txt").write_text("第一行\n第二行 替换 obsidianheron\n", encoding="utf-8")
    bump_mtime(docs / "notes.txt")
    bump_mtime(docs / "sub/plain.txt")

    rep = kb.index([docs])
    assert rep.updated == 2
    assert (rep.added, rep.removed, rep.unchanged) == (0, 0, len(FILES) - 2)

    assert paths_found(kb, "marigoldtide") == [(docs / "notes.txt").as_posix()]
    assert paths_found(kb, "obsidianheron") == [(docs / "sub/plain.txt").as_posix()]
    assert paths_found(kb, "velvetorbit") == []
    assert paths_found(kb, "sapphirewren") == []
    # untouched files are still there
    assert paths_found(kb, "quartzlemon") == [(docs / "guide.md").as_posix()]


def test_deleted_file_is_removed_with_tombstone(kb: KnowledgeBase, docs: Path) -> None:
    kb.index([docs])
    victim = docs / "mixed.md"
    assert paths_found(kb, "amberquill") == [victim.as_posix()]
    victim.unlink()

    rep = kb.index([docs])
    assert rep.removed == 1
    assert rep.unchanged == len(FILES) - 1
    assert rep.chunks_removed >= 1
    assert paths_found(kb, "amberquill") == []
    assert kb.repo.document(victim.as_posix()) is None
    n_chunks = kb.conn.execute(
        "SELECT COUNT(*) FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.path = ?",
        (victim.as_posix(),),
    ).fetchone()[0]
    assert n_chunks == 0
    tomb = kb.conn.execute(
        "SELECT COUNT(*) FROM tombstones WHERE path = ?", (victim.as_posix(),)
    ).fetchone()[0]
    assert tomb == 1
    assert kb.status()["tombstones"] == 1


def test_touch_without_change_is_unchanged(kb: KnowledgeBase, docs: Path) -> None:
    kb.index([docs])
    target = docs / "guide.md"
    before = [r.anchor for r in kb.repo.chunks_of_doc(kb.repo.document(target.as_posix()).id)]
    bump_mtime(target, 100)

    rep = kb.index([docs])
    assert rep.unchanged == len(FILES)
    assert (rep.updated, rep.added, rep.chunks_added) == (0, 0, 0)
    doc = kb.repo.document(target.as_posix())
    assert doc is not None and doc.mtime_ns == target.stat().st_mtime_ns  # new mtime recorded
    assert [r.anchor for r in kb.repo.chunks_of_doc(doc.id)] == before


def test_ignore_files_and_hidden_dirs(kb: KnowledgeBase, tmp_path: Path) -> None:
    root = tmp_path / "proj"
    write_tree(
        root,
        {
            "keep.md": "# Keep\n\nvisible word tangerinefox\n",
            ".gitignore": "build/\n*.log.txt\n",
            ".clawkbignore": "secret.md\n",
            "secret.md": "classified word plumvortex\n",
            "build/out.md": "generated word emberlatch\n",
            "trace.log.txt": "log word sablecrest\n",
            ".hidden/inside.md": "hidden word cobaltmoth\n",
            "sub/.clawkbignore": "draft*.md\n",
            "sub/draft1.md": "draft word lilacgust\n",
            "sub/final.md": "final word ivoryspar\n",
        },
    )
    rep = kb.index([root])
    assert rep.failed == 0
    indexed = {r[0] for r in kb.conn.execute("SELECT path FROM documents")}
    assert indexed == {(root / "keep.md").as_posix(), (root / "sub/final.md").as_posix()}
    assert paths_found(kb, "tangerinefox") == [(root / "keep.md").as_posix()]
    assert paths_found(kb, "ivoryspar") == [(root / "sub/final.md").as_posix()]
    for word in ("plumvortex", "emberlatch", "sablecrest", "cobaltmoth", "lilacgust"):
        assert paths_found(kb, word) == [], word


def test_single_file_does_not_remove_siblings(kb: KnowledgeBase, docs: Path) -> None:
    kb.index([docs])
    target = docs / "notes.txt"
    target.write_text("Board notes\n\nsingle file edit saffronkite\n", encoding="utf-8")
    bump_mtime(target)

    rep = kb.index([target])
    assert (rep.updated, rep.removed, rep.added) == (1, 0, 0)
    assert kb.status()["documents"] == len(FILES)
    assert paths_found(kb, "saffronkite") == [target.as_posix()]
    assert paths_found(kb, "copperfinch") == [(docs / "sub/deep.md").as_posix()]
    assert paths_found(kb, "quartzlemon") == [(docs / "guide.md").as_posix()]


def test_file_first_indexed_alone_is_removed_by_folder_run(kb: KnowledgeBase, docs: Path) -> None:
    """A file indexed on its own (or via a subfolder) is still removed when a run over
    an enclosing folder finds it deleted."""
    lone = docs / "sub/deep.md"
    kb.index([lone])
    kb.index([docs / "sub"])
    kb.index([docs])
    lone.unlink()
    (docs / "sub/plain.txt").unlink()

    rep = kb.index([docs])
    assert rep.removed == 2
    assert paths_found(kb, "copperfinch") == []
    assert paths_found(kb, "sapphirewren") == []
    assert kb.status()["documents"] == len(FILES) - 2


def test_anchors_stable_and_line_spans_right(kb: KnowledgeBase, docs: Path) -> None:
    kb.index([docs])
    guide = docs / "guide.md"

    def anchors() -> dict[str, list[str]]:
        out = {}
        for (path,) in kb.conn.execute("SELECT path FROM documents ORDER BY path").fetchall():
            doc = kb.repo.document(path)
            out[path] = [r.anchor for r in kb.repo.chunks_of_doc(doc.id)]
        return out

    first = anchors()
    assert all(first.values())
    # an edit to one file, and a full rebuild, leave the other files' anchors alone
    (docs / "notes.txt").write_text("Board notes\n\ndifferent now\n", encoding="utf-8")
    bump_mtime(docs / "notes.txt")
    kb.index([docs])
    kb.reindex()
    second = anchors()
    notes = (docs / "notes.txt").as_posix()
    assert second[notes] != first[notes]
    assert {k: v for k, v in second.items() if k != notes} == {
        k: v for k, v in first.items() if k != notes
    }
    # a forced re-parse of unchanged content (the row's size/mtime faked) gives the same anchors
    kb.conn.execute(
        "UPDATE documents SET mtime_ns = 0, content_hash = 'x' WHERE path = ?", (guide.as_posix(),)
    )
    rep = kb.index([guide])
    assert rep.updated == 1
    assert anchors()[guide.as_posix()] == first[guide.as_posix()]

    for word in (
        "quartzlemon",
        "zincharbor",
        "velvetorbit",
        "amberquill",
        "copperfinch",
        "sapphirewren",
    ):
        res = kb.search(word)
        if word == "velvetorbit":
            assert res.hits == []
            continue
        assert len(res.hits) == 1, word
        a = res.hits[0].anchor
        lines = Path(a.path).read_text(encoding="utf-8").split("\n")
        assert 1 <= a.line_start <= a.line_end <= len(lines)
        span = "\n".join(lines[a.line_start - 1 : a.line_end])
        assert word in span, (word, a)
        # and the chunk that holds the word is where the anchor says
        assert kb.chunk(a.id).line_start == a.line_start


def test_line_span_of_second_section(kb: KnowledgeBase, tmp_path: Path) -> None:
    root = tmp_path / "long"
    body = ["# 长文档", ""]
    for i in range(60):
        body += [
            f"## Section {i}",
            "",
            f"段落 {i} " + " ".join(f"filler{i}w{j}" for j in range(40)),
            "",
        ]
    body[-3] += " needleword"
    write_tree(root, {"long.md": "\n".join(body) + "\n"})
    kb.index([root])
    hits = kb.search("needleword").hits
    assert len(hits) == 1
    a = hits[0].anchor
    assert a.line_start > 100  # not the start of the file
    assert a.heading_path[-1] == "Section 59"
    lines = (root / "long.md").read_text(encoding="utf-8").split("\n")
    assert "needleword" in "\n".join(lines[a.line_start - 1 : a.line_end])
    assert "needleword" not in "\n".join(lines[: a.line_start - 1])


def test_lost_index_folder_is_rebuilt_on_search(kb: KnowledgeBase, docs: Path) -> None:
    """The lexical index is derived: if its folder vanishes, the next search rebuilds it."""
    import shutil

    kb.index([docs])
    home = kb.home
    kb.close()
    shutil.rmtree(home / "index")
    with KnowledgeBase.open(home) as again:
        assert paths_found(again, "quartzlemon") == [(docs / "guide.md").as_posix()]


def test_reindex_records_the_store_sequence(kb: KnowledgeBase, docs: Path) -> None:
    """After a rebuild the index is level with the store, so the next run need not rebuild."""
    kb.index([docs])
    kb.reindex()
    assert kb.lexical.applied_seq == kb.repo.max_seq() > 0
    segs = {s.name for s in kb.lexical.segments}
    (docs / "notes.txt").write_text("Board notes\n\none more edit hazelprism\n", encoding="utf-8")
    bump_mtime(docs / "notes.txt")
    kb.index([docs])
    # an incremental sync adds a segment next to the rebuilt one instead of replacing it
    assert segs <= {s.name for s in kb.lexical.segments}
    assert paths_found(kb, "hazelprism") == [(docs / "notes.txt").as_posix()]
