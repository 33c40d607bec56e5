"""Markdown with inline HTML: no passage is only a heading and a tag.

Docs sites wrap sections in HTML for tabs (``<div class="os-tabs-src">``,
MDX's ``<Tabs>``/``<TabItem>``). Before the fix the tag became a passage of
its own and a heading with only a tag under it became a chunk ("Verify
<div ...>") that matched every off-topic question. Now tags leave no text, a
heading-only section is glued to the subsection it introduces, and every
chunk's span still starts on its first line's source line.
"""

from __future__ import annotations

import re
from pathlib import Path

from clawkb.ingest.chunker import chunk_slices
from clawkb.kb import KnowledgeBase
from clawkb.parsers.markdown import MarkdownParser
from clawkb.types import Chunk, Slice

TABS = """\
# Install

Install the toolchain first.

## Verify

<div class="os-tabs-src">

### Linux

Run `ckbtool --version` in a terminal; it prints the version.

### Windows

Run `ckbtool.exe --version` in PowerShell.

</div>

## Next steps
<div class="note">
Read the <a href="flash.md">flashing guide</a> &amp; the
<em>recovery</em> notes.
</div>

<script>
window.tabs = init();
</script>
"""

MDX = """\
import Tabs from '@theme/Tabs';
import TabItem from '@theme/TabItem';

## Build

<Tabs groupId="os">
<TabItem value="linux" label="Linux">

Run `make firmware` in the checkout.

</TabItem>
<TabItem value="mac" label="macOS">

Run `gmake firmware`; see <https://ckb.example/mac>.

</TabItem>
</Tabs>
"""

TAG = re.compile(r"</?[A-Za-z][\w.-]*(?:\s[^<>]*)?>")


def parse(text: str, name: str = "tabs.md") -> tuple[list[Slice], list[Chunk], list[str]]:
    doc = MarkdownParser().parse(text.encode(), name)
    return list(doc.slices), chunk_slices(doc.slices), text.split("\n")


def body_lines(chunk: Chunk) -> list[str]:
    """The chunk's lines that are not one of its headings."""
    heads = set(chunk.heading_path)
    return [ln for ln in chunk.text.split("\n") if ln.strip() and ln.strip() not in heads]


def test_no_slice_is_a_tag_and_no_chunk_is_only_heading_and_tag() -> None:
    slices, chunks, _ = parse(TABS)
    for s in slices:
        assert not TAG.search(s.text), s.text
        assert "window.tabs" not in s.text  # a script block is not a passage
    for c in chunks:
        assert body_lines(c), f"chunk {c.line_start}-{c.line_end} is only headings: {c.text!r}"


def test_heading_stub_is_glued_to_the_subsection_it_introduces() -> None:
    _, chunks, source = parse(TABS)
    verify = next(c for c in chunks if "Verify" in c.heading_path and "Linux" in c.text)
    assert verify.text.split("\n")[0] == "Verify"
    assert (verify.line_start, verify.line_end) == (5, 11)
    assert verify.heading_path == ("Install", "Verify", "Linux")
    note = next(c for c in chunks if c.heading_path == ("Install", "Next steps"))
    assert note.text == "Next steps\n\nRead the flashing guide & the\nrecovery notes."
    assert (note.line_start, note.line_end) == (19, 22)  # exact: the text's own lines
    for c in chunks:  # every chunk starts on the source line of its first line
        first = c.text.split("\n")[0]
        assert first.strip("# ") in source[c.line_start - 1], (first, c.line_start)


def test_stub_is_not_glued_to_a_sibling() -> None:
    _, chunks, _ = parse("# Top\n\n## Empty\n\n## Full\n\nBody of the full section.\n")
    # "Top" introduces "Empty" (glued); "Empty" does not introduce its sibling "Full"
    assert [(c.text, c.heading_path, c.line_start, c.line_end) for c in chunks] == [
        ("Top\n\nEmpty", ("Top", "Empty"), 1, 3),
        ("Full\n\nBody of the full section.", ("Top", "Full"), 5, 7),
    ]


def test_stub_is_not_glued_across_pages() -> None:
    slices = [
        Slice("Chapter 3", 40, 40, ("Chapter 3",), page=2),
        Slice("Registers", 1, 1, ("Chapter 3", "Registers"), page=3),
        Slice("Table below.", 2, 2, ("Chapter 3", "Registers"), page=3),
    ]
    chunks = chunk_slices(slices)
    assert [(c.text, c.page, c.line_start) for c in chunks] == [
        ("Chapter 3", 2, 40),
        ("Registers\n\nTable below.", 3, 1),
    ]


def test_mdx_tabs_keep_their_text_not_their_tags() -> None:
    slices, chunks, _ = parse(MDX, "build.mdx")
    texts = [s.text for s in slices]
    assert "Run `make firmware` in the checkout." in texts
    assert "Run `gmake firmware`; see https://ckb.example/mac." in texts
    assert not any(TAG.search(t) for t in texts)
    assert [c.heading_path for c in chunks if "make firmware" in c.text] == [("Build",)]


def test_glued_chunk_is_found_by_its_heading(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tabs.md").write_text(TABS, encoding="utf-8")
    (docs / "other.md").write_text(
        "# Verify signatures\n\nCheck the signature of every release archive.\n",
        encoding="utf-8",
    )
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index([docs])
        hits = [h for h in kb.search("Verify", limit=5).hits if h.anchor.path.endswith("tabs.md")]
        assert hits and hits[0].anchor.line_start == 5
        assert "Verify" in hits[0].anchor.heading_path
        off_topic = kb.search("unrelated thermal shutdown question", limit=5).hits
        assert all("os-tabs" not in h.text for h in off_topic)
