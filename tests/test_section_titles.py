"""A section's title, searched lexically, finds that section and names it.

Two causes of misses on Sphinx trees, both fixed here and measured on
esp-idf-docs by bench/formats_trees.py: a heading-only section glued to its
first subsection was reported under the subsection's path, and the BM25F
title field (the whole heading path) let a subsection that repeats its
parent's words outrank the parent.
"""

from __future__ import annotations

from pathlib import Path

from clawkb.index.lexical import LEXICAL_FIELDS_VERSION
from clawkb.ingest.chunker import started_sections
from clawkb.kb import KnowledgeBase
from clawkb.retrieve.hits import section_path
from clawkb.store import db
from clawkb.text import tokenize

GLUED = ("BluFi", "GATT Related Instructions", "UUID")


def test_started_sections_reads_the_glued_heading_lines() -> None:
    assert started_sections("GATT Related Instructions\n\nUUID\n\nThe service", GLUED) == 2
    assert started_sections("UUID\n\nThe service", GLUED) == 1
    assert started_sections("BluFi\n\nGATT Related Instructions\n\nUUID\n\nx", GLUED) == 3
    # the first line names a parent but the next one is not the subsection's heading
    assert started_sections("GATT Related Instructions\n\nbody text", GLUED) == 1
    assert started_sections("anything", ("Only",)) == 1


def test_section_path_names_the_heading_the_query_spells() -> None:
    text = "GATT Related Instructions\n\nUUID\n\nThe service UUID is 0xFFFF."
    terms = tuple(dict.fromkeys(tokenize("GATT Related Instructions")))
    assert section_path(text, GLUED, terms) == GLUED[:2]
    assert section_path(text, GLUED, tuple(tokenize("UUID"))) == GLUED
    # terms spread over both headings, or in neither: the chunk's own path
    assert section_path(text, GLUED, tuple(tokenize("GATT UUID"))) == GLUED
    assert section_path(text, GLUED, tuple(tokenize("service value"))) == GLUED
    # a tie goes to the shorter heading: "API Reference" over its longer child
    path = ("Memory Synchronization", "API Reference", "API Reference - ESP Msync Driver")
    glued = "API Reference\n\nAPI Reference - ESP Msync Driver\n\nHeader"
    assert section_path(glued, path, tuple(tokenize("API Reference"))) == path[:2]
    # a not glued chunk keeps its path whatever the query
    assert section_path("UUID\n\nbody", GLUED, tuple(tokenize("GATT"))) == GLUED


RST = """\
Device Discovery
================

Devices advertise and scan. Advertising and scanning are the two halves.

Basic Concepts of Advertising
-----------------------------

An advertiser sends packets on the advertising channels, a basic concept.
Advertising intervals and advertising data decide what a scanner sees.

Basic Concepts of Scanning
^^^^^^^^^^^^^^^^^^^^^^^^^^

Basic concepts of scanning: a scanner listens for advertising packets,
basic basic concepts of passive and active scanning and advertising reports.

GATT Related Instructions
-------------------------

UUID
^^^^

The BluFi service UUID is 0xFFFF; the write characteristic is 0xFF01.
"""


def test_titles_find_their_sections_end_to_end(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "discovery.rst").write_text(RST, "utf-8")
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index([tmp_path / "docs"])
        want = {
            "Basic Concepts of Advertising": ("Device Discovery", "Basic Concepts of Advertising"),
            "Basic Concepts of Scanning": (
                "Device Discovery",
                "Basic Concepts of Advertising",
                "Basic Concepts of Scanning",
            ),
            "GATT Related Instructions": ("Device Discovery", "GATT Related Instructions"),
            "UUID": ("Device Discovery", "GATT Related Instructions", "UUID"),
        }
        # with the heading stage; plain BM25F can rank the subsection "Basic Concepts of
        # Scanning" (which repeats "basic concepts") over its parent (issue 22, open)
        for title, path in want.items():
            hit = kb.search(title, mode="lexical", headings=True).hits[0]
            assert hit.anchor.heading_path == path, title
        # a KB indexed under another field rule is rebuilt from the store
        with db.transaction(kb.conn):
            db.set_meta(kb.conn, "lexical_fields", "0")
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        kb.index([tmp_path / "docs"])
        assert db.get_meta(kb.conn, "lexical_fields") == LEXICAL_FIELDS_VERSION
        hit = kb.search("GATT Related Instructions", mode="lexical").hits[0]
        assert hit.anchor.heading_path[-1] == "GATT Related Instructions"
