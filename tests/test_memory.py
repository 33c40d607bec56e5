"""Agent memory on a real KB: store/dedup, recall weighting, TTL, forget, list, search isolation."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from clawkb import KnowledgeBase
from clawkb.errors import ConfigError, NotFoundError
from clawkb.memory import Memory, Weighting, memory_weight, parse_ttl
from clawkb.memory.model import DAY

DOCS = {
    "uart.md": "# UART\n\nThe debug console UART2 runs at 1500000 baud, 8N1.\n",
    "ddr.md": "# DDR\n\nDDR4 single-ended impedance is 50 ohm, differential 100 ohm.\n",
}


class Clock:
    """A settable clock so expiry and recency are tested without sleeping."""

    def __init__(self, t: float = 1_700_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture()
def kb(tmp_path: Path):
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text, encoding="utf-8")
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index([root])
        yield kb


@pytest.fixture()
def clock() -> Clock:
    return Clock()


@pytest.fixture()
def mem(kb: KnowledgeBase, clock: Clock) -> Memory:
    return Memory(kb, clock)


def test_store_is_searchable_at_once_with_an_anchor(mem: Memory) -> None:
    res = mem.store("The LX board I2C1 needs 4.7k pull-ups", namespace="bringup", tags=["i2c"])
    assert res.created
    rec = res.record
    assert rec.path == f"memory://bringup/{rec.id}"
    hits = mem.recall("pull-ups", namespace="bringup").hits
    assert [h.memory.id for h in hits if h.memory] == [rec.id]
    hit = hits[0].hit
    assert hit.anchor.path == rec.path and hit.anchor.line_start == 1
    assert mem.kb.chunk(hit.anchor.id).text == rec.text  # get_chunk works on memories


def test_same_text_same_namespace_dedups(mem: Memory, clock: Clock) -> None:
    first = mem.store("Flash with rkdeveloptool", namespace="a", tags=["flash"], importance=0.9)
    clock.t += 60
    again = mem.store("Flash  with\nrkdeveloptool ", namespace="a", tags=["tools"])
    assert not again.created and again.record.id == first.record.id
    assert again.record.created_at == first.record.created_at
    assert again.record.updated_at == first.record.updated_at + 60
    assert again.record.tags == ("flash", "tools")  # tags accumulate
    assert again.record.importance == 0.9  # kept when not given
    assert len(mem.list()) == 1
    # one document, one set of chunks: no duplicate hits
    assert len(mem.recall("rkdeveloptool").hits) == 1
    other = mem.store("Flash with rkdeveloptool", namespace="b")
    assert other.created and other.record.id != first.record.id


def test_plain_search_hides_memories_unless_asked(mem: Memory) -> None:
    mem.store("UART2 console baud is 1500000 (remember)", namespace="n")
    plain = mem.kb.search("1500000 baud", limit=10)
    assert plain.hits and all(not h.anchor.path.startswith("memory://") for h in plain.hits)
    both = mem.kb.search("1500000 baud", limit=10, include_memory=True)
    assert any(h.anchor.path.startswith("memory://n/") for h in both.hits)


def test_hidden_memories_do_not_starve_document_results(mem: Memory) -> None:
    """Many memories that outrank the documents must not push them out of the top-k."""
    for i in range(40):
        mem.store(f"baud baud baud note {i}", namespace="spam")
    res = mem.kb.search("baud", limit=1)
    assert [Path(h.anchor.path).name for h in res.hits] == ["uart.md"]


def test_recall_scopes_namespace_and_tags(mem: Memory) -> None:
    mem.store("ESD diode on the USB lines", namespace="hw", tags=["usb", "esd"])
    mem.store("USB gadget config needs configfs", namespace="sw", tags=["usb"])
    assert {h.memory.namespace for h in mem.recall("USB").hits if h.memory} == {"hw", "sw"}
    assert [h.memory.namespace for h in mem.recall("USB", namespace="sw").hits if h.memory] == [
        "sw"
    ]
    tagged = mem.recall("USB", tags=["usb", "esd"]).hits
    assert [h.memory.namespace for h in tagged if h.memory] == ["hw"]
    assert mem.recall("USB", namespace="nothing-here").hits == []


def test_recency_and_importance_reorder_equal_matches(mem: Memory, clock: Clock) -> None:
    old = mem.store("regulator alpha runs hot", namespace="t").record
    clock.t += 90 * DAY
    new = mem.store("regulator beta runs hot", namespace="t").record
    ranked = [h.memory.id for h in mem.recall("regulator hot", namespace="t").hits if h.memory]
    assert ranked == [new.id, old.id]
    mem.store("regulator alpha runs hot", namespace="t", importance=1.0)  # refresh + promote
    clock.t += 1
    top = mem.recall("regulator hot", namespace="t", explain=True).hits[0]
    assert top.memory is not None and top.memory.id == old.id
    exp = top.hit.explanation["memory"]
    assert exp["importance"] == 1.0 and exp["weight"] == pytest.approx(top.weight)
    assert top.score == pytest.approx(top.relevance * top.weight)


def test_weight_formula() -> None:
    w = Weighting(half_life_days=30, recency_floor=0.25)
    assert memory_weight(0.5, 0, w) == pytest.approx(1.0)
    assert memory_weight(1.0, 0, w) == pytest.approx(1.5)
    assert memory_weight(0.5, 30 * DAY, w) == pytest.approx(0.25 + 0.75 * 0.5)
    assert memory_weight(0.5, 3000 * DAY, w) == pytest.approx(0.25, abs=1e-6)
    assert memory_weight(0.0, -5, w) == pytest.approx(0.5)  # clock skew counts as new


def test_weighting_read_from_config(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    home.mkdir()
    (home / "config.yaml").write_text("memory:\n  half_life_days: 7\n  recency_floor: 0\n")
    with KnowledgeBase.open(home, create=True) as kb:
        assert kb.memory.weighting == Weighting(7.0, 0.0)
    (home / "config.yaml").write_text("memory:\n  half_life: 7\n")
    with pytest.raises(ConfigError, match=r"did you mean 'memory\.half_life_days'"):
        KnowledgeBase.open(home)  # the whole config.yaml is checked when the KB opens


def test_ttl_expiry_hides_then_purges_on_next_write(mem: Memory, clock: Clock) -> None:
    short = mem.store("temporary workaround: disable SMP", namespace="t", ttl="1h").record
    assert short.expires_at == pytest.approx(clock.t + 3600)
    assert mem.recall("workaround SMP").hits
    clock.t += 3601
    assert mem.recall("workaround SMP").hits == []
    assert mem.list() == []
    with pytest.raises(NotFoundError):
        mem.get(short.id)
    # still in the store until the next write purges it
    assert mem.kb.repo.document(short.path) is not None
    mem.store("something else entirely", namespace="t")
    assert mem.kb.repo.document(short.path) is None
    row = mem.kb.conn.execute("SELECT COUNT(*) FROM memories WHERE id = ?", (short.id,))
    assert row.fetchone()[0] == 0
    assert not mem.kb.search("workaround SMP", include_memory=True).hits


def test_forget_by_id_tag_query_with_dry_run(mem: Memory) -> None:
    a = mem.store("CAN bus termination 120 ohm", namespace="x", tags=["can"]).record
    b = mem.store("CAN transceiver TJA1051 standby pin", namespace="x", tags=["can"]).record
    c = mem.store("Ethernet PHY strap pins", namespace="x", tags=["eth"]).record

    dry = mem.forget(tags=["can"], dry_run=True)
    assert dry.dry_run and {r.id for r in dry.records} == {a.id, b.id}
    assert len(mem.list()) == 3  # nothing removed

    # query: every term must be in the text ("pins" alone is not "standby pin")
    assert [r.id for r in mem.forget(query="strap pins", dry_run=True).records] == [c.id]
    assert [r.id for r in mem.forget(query="standby TJA1051", dry_run=True).records] == [b.id]
    # selectors combine with AND
    assert mem.forget(tags=["eth"], query="termination", dry_run=True).records == []

    gone = mem.forget([a.id[:6]])
    assert [r.id for r in gone.records] == [a.id]
    assert {r.id for r in mem.list()} == {b.id, c.id}
    assert not mem.recall("termination 120").hits
    assert not mem.kb.search("termination", include_memory=True).hits


def test_forget_needs_a_selector_and_reports_bad_ids(mem: Memory) -> None:
    with pytest.raises(ConfigError, match="at least one"):
        mem.forget()
    with pytest.raises(ConfigError, match="hex"):
        mem.forget(["not-an-id"])
    with pytest.raises(NotFoundError, match="abcdef12"):
        mem.forget(["abcdef12"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text": "   "}, "empty"),
        ({"text": "x" * 20_001}, "clawkb index"),
        ({"text": "ok", "namespace": "has space"}, "namespace"),
        ({"text": "ok", "namespace": ""}, "namespace"),
        ({"text": "ok", "importance": 1.5}, "between 0 and 1"),
        ({"text": "ok", "ttl": "soon"}, "ttl"),
        ({"text": "ok", "ttl": -5}, "positive"),
        ({"text": "ok", "tags": [" "]}, "tag"),
    ],
)
def test_store_rejects_bad_input_clearly(mem: Memory, kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        mem.store(**kwargs)
    assert mem.list() == []


def test_parse_ttl_units() -> None:
    assert parse_ttl(None) is None
    assert parse_ttl(90) == 90
    assert parse_ttl("90s") == 90
    assert parse_ttl("30m") == 1800
    assert parse_ttl("1.5h") == 5400
    assert parse_ttl("7d") == 7 * DAY
    assert parse_ttl("2W") == 14 * DAY


def test_recall_with_documents_blends_both_sources(mem: Memory) -> None:
    mem.store("DDR4 impedance on rev B was measured at 48 ohm", namespace="ddr")
    res = mem.recall("DDR4 impedance", include_documents=True, limit=4)
    sources = [h.source for h in res.hits]
    assert sources[:2] == ["memory", "document"]  # rank fusion interleaves, memory first
    doc = next(h for h in res.hits if h.source == "document")
    assert Path(doc.hit.anchor.path).name == "ddr.md" and doc.memory is None
    assert [h.hit.rank for h in res.hits] == list(range(1, len(res.hits) + 1))


def test_memories_survive_reopen_and_reindex(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        mid = kb.memory.store("persistent fact about GPIO3_B7", tags=["gpio"]).record.id
    with KnowledgeBase.open(home) as kb:
        assert kb.memory.get(mid[:8]).tags == ("gpio",)
        kb.reindex()
        assert [h.memory.id for h in kb.memory.recall("GPIO3_B7").hits if h.memory] == [mid]
    # the table is created by a named migration
    conn = sqlite3.connect(home / "clawkb.sqlite")
    names = [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY id")]
    conn.close()
    assert "0002_memory" in names


def test_list_orders_by_last_write_and_counts_namespaces(mem: Memory, clock: Clock) -> None:
    mem.store("first", namespace="a")
    clock.t += 1
    mem.store("second", namespace="b", tags=["t"])
    clock.t += 1
    mem.store("first", namespace="a")  # refreshed: now the latest
    assert [r.text for r in mem.list()] == ["first", "second"]
    assert [r.text for r in mem.list(tags=["t"])] == ["second"]
    assert [r.text for r in mem.list(limit=1)] == ["first"]
    assert mem.namespaces() == {"a": 1, "b": 1}
