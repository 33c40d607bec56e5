"""Tables line up by display width: Chinese cells take two terminal columns."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from click.testing import CliRunner

from clawkb.cli.main import cli
from clawkb.cli.table import format_table

BOARD = """# 开发板 board

## Pin Aliases

| alias | pin | notes |
|-------|-----|-------|
| red_led | 13 | external |
| 红色指示灯 | PA6 | 外接 |
| 串口发送TX | PA9 | 调试串口 |
| i2c_scl | PB8 | |
"""


def width(text: str) -> int:
    """Terminal columns, computed independently of the library under test."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def column_starts(line: str, markers: list[str]) -> list[int]:
    return [width(line[: line.index(m)]) for m in markers]


def test_format_table_pads_by_display_width() -> None:
    lines = format_table(
        [["LED", "PA5", "板/a.md"], ["红色指示灯", "PB12", "x.md"], ["中", "P1", "说明.md"]],
        headers=["alias", "pin", "where"],
    )
    assert len(lines) == 4
    starts = {
        width(ln[: ln.index(p)]) for ln, p in zip(lines, ["pin", "PA5", "PB12", "P1"], strict=True)
    }
    assert len(starts) == 1
    starts = {
        width(ln[: ln.index(p)])
        for ln, p in zip(lines, ["where", "板", "x.md", "说明"], strict=True)
    }
    assert len(starts) == 1
    assert all(ln == ln.rstrip() for ln in lines)


def test_pins_listing_aligns_chinese_aliases(tmp_path: Path) -> None:
    ds = tmp_path / "datasheets"
    ds.mkdir()
    (ds / "devboard.md").write_text(BOARD, encoding="utf-8")
    kb = str(tmp_path / "kb")
    runner = CliRunner()
    assert runner.invoke(cli, ["--kb", kb, "index", "--datasheets", str(ds)]).exit_code == 0
    res = runner.invoke(cli, ["--kb", kb, "pins"])
    assert res.exit_code == 0, res.output
    rows = [ln for ln in res.stdout.splitlines() if " pin " in ln]
    assert len(rows) == 4, res.stdout
    pin_cols = {width(ln[: ln.index(" pin ")]) for ln in rows}
    where_cols = {width(ln[: ln.index("devboard.md")]) for ln in rows}
    assert len(pin_cols) == 1 and len(where_cols) == 1, res.stdout


def test_memory_list_pads_namespaces_and_clips_text_by_width(tmp_path: Path) -> None:
    kb = str(tmp_path / "kb")
    runner = CliRunner()
    long_zh = "调试串口在J7排针上，波特率为115200，" * 10
    for ns, text in [("bringup", "UART on J7"), ("硬件调试", long_zh), ("x", "short note")]:
        res = runner.invoke(cli, ["--kb", kb, "memory", "store", "-N", ns, text])
        assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["--kb", kb, "memory", "list"])
    lines = res.stdout.splitlines()
    heads = [ln for ln in lines if not ln.startswith("    ") and not ln.startswith("(")]
    assert len(heads) == 3
    dates = [re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", ln) for ln in heads]
    date_cols = {width(ln[: m.start()]) for ln, m in zip(heads, dates, strict=True) if m}
    assert len(date_cols) == 1 and all(dates), res.stdout
    texts = [ln[4:] for ln in lines if ln.startswith("    ")]
    assert all(width(t) <= 80 for t in texts)
    assert any(t.endswith("...") and width(t) >= 77 for t in texts)
