"""The example datasheets and their golden hardware queries (issue targets)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawkb.hardware import index_datasheets
from clawkb.hardware.golden import check_hardware_golden
from clawkb.kb import KnowledgeBase

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:  # type: ignore[type-arg]
    with KnowledgeBase.open(tmp_path_factory.mktemp("hwkb"), create=True) as kb:
        index_datasheets(kb, [], [EXAMPLES / "datasheets"])
        boards = {r[0] for r in kb.conn.execute("SELECT DISTINCT board FROM documents")}
        assert {"nucleo-f401re", "arduino-uno", "esp32-devkitc", "rpi-pico", ""} <= boards
        return check_hardware_golden(kb, EXAMPLES / "hardware-golden.yaml")


def test_golden_set_size(report: dict) -> None:  # type: ignore[type-arg]
    assert report["total"] >= 25 and report["alias_queries"] >= 10


def test_hit_at_3_with_board(report: dict) -> None:  # type: ignore[type-arg]
    failures = [r for r in report["results"] if not r["passed"]]
    assert report["hit_at_k"] >= 0.9, failures


def test_alias_block_correct_for_every_alias_query(report: dict) -> None:  # type: ignore[type-arg]
    wrong = [r for r in report["results"] if r.get("aliases_ok") is False]
    assert wrong == []
