"""The one search path: defects found at the seams between packages (issue 9).

Each test names the defect it guards against; all run on real SQLite files
with the real static embedding model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from clawkb.embed.run import embed_kb
from clawkb.errors import ConfigError
from clawkb.hardware import index_datasheets
from clawkb.kb import KnowledgeBase, TextRecord
from clawkb.retrieve.filters import Filters

pytest.importorskip("static_model")

DOCS = [
    TextRecord("ddr.md", "# DDR\n\n## Impedance\n\nSingle-ended 50 ohm, differential 100 ohm."),
    TextRecord("usb.md", "# USB\n\nUSB 2.0 data lines are a 90 ohm differential pair."),
    TextRecord("cook.md", "# Pasta\n\nBoil spaghetti for ten minutes in salted water."),
]


def open_kb(tmp_path: Path) -> KnowledgeBase:
    home = tmp_path / "kb"
    home.mkdir(exist_ok=True)
    (home / "config.yaml").write_text("embedding: static\n", "utf-8")
    return KnowledgeBase.open(home, create=True)


def test_memories_stay_out_of_hybrid_and_dense_results(tmp_path: Path) -> None:
    """Defect 1: after `embed`, auto (hybrid) search returned memory:// hits."""
    with open_kb(tmp_path) as kb:
        kb.index_texts(DOCS)
        kb.memory.store("the differential pair impedance is 100 ohm on rev B", namespace="hw")
        embed_kb(kb)
        for mode in (None, "hybrid", "dense", "lexical"):
            res = kb.search("differential ohm impedance", mode=mode, limit=10)
            assert res.hits, mode
            assert not [h for h in res.hits if h.anchor.path.startswith("memory://")], mode
        with_mem = kb.search("differential ohm impedance", limit=10, include_memory=True)
        assert any(h.anchor.path.startswith("memory://") for h in with_mem.hits)


def test_merged_hits_do_not_repeat_overlapping_text(tmp_path: Path) -> None:
    """Defect 2: adjacent chunks were joined with the chunker's overlap left in."""
    body = " ".join(  # one long paragraph: the chunker cuts it by sentence, with overlap
        f"Step {i} of the flux capacitor calibration sets register R{i}." for i in range(60)
    )
    with open_kb(tmp_path) as kb:  # default chunking: overlap 0.15
        kb.index_texts([TextRecord("long.md", "# Flux capacitor\n\n" + body + "\n")])
        res = kb.search("flux capacitor calibration register", merge=True, limit=3)
        merged = [h for h in res.hits if h.explanation and len(h.explanation.get("merged", [])) > 1]
        assert merged, "the test needs a merged hit"
        for h in merged:
            for i in range(60):
                assert h.text.count(f"Step {i} of") <= 1, h.text


def test_board_search_honours_mode_filters_and_options(tmp_path: Path) -> None:
    """Defect 3: with boards, mode, filters and retrieval options were silently dropped."""
    ds = tmp_path / "datasheets"
    ds.mkdir()
    (ds / "nucleo.md").write_text("# Nucleo\n\n## GPIO\n\nPin 13 drives the LED.\n", "utf-8")
    (ds / "uno.md").write_text("# Uno\n\n## GPIO\n\nThe LED on pin 13 blinks.\n", "utf-8")
    (ds / "notes.txt").write_text("LED pin 13 notes in plain text.\n", "utf-8")
    with open_kb(tmp_path) as kb:
        index_datasheets(kb, [], [ds])
        embed_kb(kb)
        res = kb.search("led pin", boards=["nucleo"], filters=Filters(doc_types=("txt",)))
        assert [Path(h.anchor.path).name for h in res.hits] == ["notes.txt"]
        dense = kb.search("led pin", boards=["nucleo"], mode="dense", explain=True)
        assert dense.mode == "dense"
        assert "dense" in dense.hits[0].explanation["channels"]
        top = kb.search("led pin", boards=["nucleo"], mode="hybrid", explain=True, limit=5)
        for h in top.hits:  # the boost still applies, after fusion
            boost = 1.5 if Path(h.anchor.path).name == "nucleo.md" else 1.0
            assert h.explanation["board"]["boost"] == boost
            assert h.score == pytest.approx(h.explanation["board"]["before"] * boost, rel=1e-4)
        with pytest.raises(ConfigError, match="w_dense"):
            kb.search("led pin", boards=["nucleo"], w_dens=0)


def test_misspelled_keyword_is_an_error_naming_the_closest(tmp_path: Path) -> None:
    """Issue 9 #11: `kb.search(q, w_dens=0)` was silently ignored."""
    with open_kb(tmp_path) as kb:
        kb.index_texts(DOCS)
        with pytest.raises(ConfigError, match=r"w_dens.*w_dense"):
            kb.search("differential", w_dens=0)
        with pytest.raises(ConfigError, match="early_return"):
            kb.search("differential", mode="hybrid", early_retrun=0.1)
        assert kb.search("differential", w_dense=0.0).hits  # the right name still works


def test_limit_above_candidate_depth_returns_all(tmp_path: Path) -> None:
    """Issue 9 #11: `--limit 300` silently returned 100 once vectors existed."""
    recs = [
        TextRecord(f"n{i:03}.md", f"# Note {i}\n\nThe sensor value {i} is logged hourly.")
        for i in range(320)
    ]
    with open_kb(tmp_path) as kb:
        kb.index_texts(recs)
        embed_kb(kb)
        for mode in (None, "hybrid", "lexical"):
            res = kb.search("sensor logged", mode=mode, limit=300, merge=False)
            assert len(res.hits) == 300, mode
            assert len({h.anchor.id for h in res.hits}) == 300
