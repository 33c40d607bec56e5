"""New content is searchable in every channel without a manual step (issue 19 item 7).

With the shipped e5-small model: ``index``, ``learn`` and ``memory store`` embed
what they add once the KB has vectors; ``index --no-embed`` leaves the chunks
pending (``status`` counts them) and they still rank by the lexical channel,
never buried by the dense one; the server embeds after a write in a job of its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from clawkb.cli.main import cli
from clawkb.kb import KnowledgeBase
from clawkb.retrieve.fusion import Channel, rrf
from clawkb.retrieve.unembedded import place
from kb_helpers import write_docs

pytest.importorskip("onnxruntime")

DOCS = {
    "can.md": "# CAN bus termination\n\nA CAN bus needs a 120 ohm termination resistor at each "
    "of its two ends; the resistance between CANH and CANL is then about 60 ohm.\n",
    "uart.md": "# Debug console\n\nThe debug UART runs at 1500000 baud on header J6.\n",
    "ddr.md": "# DDR4 routing\n\nDifferential pairs are routed at 100 ohm impedance.\n",
}


def run(*args: str) -> Any:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res


def status(home: Path) -> dict[str, Any]:
    return json.loads(run("--kb", str(home), "status", "--json").output)["dense"]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("eow")
    docs = write_docs(root, DOCS)
    run("--kb", str(root / "kb"), "index", str(docs))
    run("--kb", str(root / "kb"), "embed")
    return root / "kb"


def dense_paths(home: Path, q: str) -> list[str]:
    with KnowledgeBase.open(home) as kb:
        res = kb.search(q, mode="dense", limit=10, min_confidence=0.0)
        return [Path(h.anchor.path).name for h in res.hits]


def test_index_learn_and_memory_store_embed_what_they_add(home: Path) -> None:
    docs = home.parent / "more"
    docs.mkdir()
    (docs / "i2c.md").write_text(
        "# I2C pull-ups\n\nThe I2C bus uses 4.7 kilo-ohm pull-up resistors on SDA and SCL.\n",
        "utf-8",
    )
    out = run("--kb", str(home), "index", str(docs))
    assert "embedded 1 new chunks" in out.output  # stderr is mixed into output here
    assert status(home)["pending"] == 0
    assert "i2c.md" in dense_paths(home, "I2C pull-up resistor value")

    mem = json.loads(
        run("--kb", str(home), "memory", "store", "Lab bench PSU is set to 12 V", "--json").output
    )
    assert mem["vectors"] == {"embedded": 1, "pending": 0, "error": None}
    learned = json.loads(
        run("--kb", str(home), "learn", "The SPI flash needs 3.3 V, never 5 V.", "--json").output
    )
    assert learned["vectors"]["pending"] == 0 and learned["vectors"]["embedded"] >= 1
    assert status(home)["pending"] == 0
    with KnowledgeBase.open(home) as kb:
        res = kb.search("SPI flash supply voltage", mode="dense", min_confidence=0.0)
        assert any("learned" in h.anchor.path for h in res.hits[:3])


def test_pending_chunks_rank_by_the_lexical_channel(home: Path) -> None:
    docs = home.parent / "late"
    docs.mkdir()
    # the exact words of the query, in a chunk that has no vector yet
    (docs / "can-rev-b.md").write_text(
        "# Rev B CAN termination\n\nRev B moves the CAN termination resistor next to J9 "
        "and keeps the 120 ohm value.\n",
        "utf-8",
    )
    out = CliRunner().invoke(cli, ["--kb", str(home), "index", str(docs), "--no-embed"])
    assert out.exit_code == 0 and "embedded" not in out.output
    assert status(home)["pending"] == 1
    text = run("--kb", str(home), "status").output
    assert "1 chunks pending" in text
    with KnowledgeBase.open(home) as kb:
        q = "Rev B CAN termination resistor J9"
        res = kb.search(q, limit=3, early_return=0.0)
        assert res.mode == "hybrid" and not res.abstained
        assert Path(res.hits[0].anchor.path).name == "can-rev-b.md"
        assert "can-rev-b.md" not in dense_paths(home, q)  # the dense channel cannot see it
    run("--kb", str(home), "embed")
    assert status(home)["pending"] == 0


def test_place_puts_an_unembedded_chunk_at_its_lexical_rank() -> None:
    lexical = Channel(np.array([7, 1, 2]), np.array([9.0, 5.0, 4.0]))
    dense = Channel(np.array([1, 2, 3]), np.array([0.9, 0.8, 0.7], np.float32))
    has = lambda ids: np.isin(ids, [1, 2, 3])  # noqa: E731 - 7 has no vector
    placed = place(lexical, dense, has)
    assert placed.ids.tolist() == [7, 1, 2, 3]
    assert placed.scores.tolist() == pytest.approx([0.9, 0.9, 0.8, 0.7])
    weights = {"lexical": 1.0, "dense": 1.0}
    before = rrf({"lexical": lexical, "dense": dense}, weights, k=20)
    after = rrf({"lexical": lexical, "dense": placed}, weights, k=20)
    assert before[0].chunk_id == 1  # buried: only one channel returned it
    assert after[0].chunk_id == 7
    # nothing pending: the dense channel is returned as is
    assert place(lexical, dense, lambda ids: np.ones(len(ids), bool)) is dense
    # a pending chunk ranked below everything the dense channel holds goes last
    far = place(Channel(np.array([1, 2, 3, 9]), np.ones(4)), dense, has)
    assert far.ids.tolist() == [1, 2, 3, 9] and far.scores[-1] == pytest.approx(0.7)


def test_server_embeds_after_a_write_in_the_background(home: Path) -> None:
    pytest.importorskip("fastapi")
    from server_helpers import poll, serving

    with serving(home) as srv:
        srv.ok("POST", "/api/v1/memory", json={"text": "The spare JTAG probe is in drawer 3"})
        done = poll(lambda: srv.ok("GET", "/api/v1/status")["dense"]["pending"] == 0, 60)
        assert done
        hits = srv.ok("GET", "/api/v1/memory/recall", params={"q": "where is the JTAG probe"})[
            "hits"
        ]
        assert hits and "drawer 3" in json.dumps(hits[0])
