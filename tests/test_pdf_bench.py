"""Smoke test for bench/pdf_extract.py: every extractor runs and the metrics add up."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("pypdfium2")
pytest.importorskip("pdfplumber")
pytest.importorskip("pypdf")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import pdf_extract  # noqa: E402
import pdf_samples  # noqa: E402


def test_every_extractor_reads_the_table_page() -> None:
    data = pdf_samples.long_table_pdf(rows=12)
    for name, extract in pdf_extract.EXTRACTORS.items():
        pages = extract(data)
        assert len(pages) == 1, name
        assert "CTRL_REG11" in pages[0], name


def test_row_integrity_metric_tells_a_row_from_scattered_cells() -> None:
    assert pdf_extract._in_order(["PA9", "I/O FT", "USART1_TX"], "10PA9I/OFTUSART1_TX/TIM1_CH2")
    assert not pdf_extract._in_order(["PA9", "USART1_TX"], "USART1_TX")


def test_ratios_are_clawkb_over_peer() -> None:
    rows = [
        {"fixture": "f", "extractor": name, "pages_per_s": speed}
        for name, speed in [
            ("clawkb", 100.0),
            ("pdfplumber-text", 10.0),
            ("pdfplumber+tables", 5.0),
            ("pypdf", 200.0),
        ]
    ]
    assert pdf_extract.ratios(rows) == {
        "f": {"pdfplumber-text": 10.0, "pdfplumber+tables": 20.0, "pypdf": 0.5}
    }
