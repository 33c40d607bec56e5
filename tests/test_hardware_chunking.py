"""The chunker's ``row_tables`` option (used for datasheets) and the header predicate."""

from __future__ import annotations

from clawkb.hardware.hook import is_row_table
from clawkb.ingest.chunker import ChunkConfig, chunk_slices
from clawkb.types import Slice


def test_row_tables_cut_one_row_per_chunk_with_header() -> None:
    lines = ["| Register | Reset value |", "|---|---|", "| MODER | 0xA800_0000 |", "| ODR | 0x0 |"]
    intro = Slice("GPIO registers", 3, 3, ("GPIO",))
    table = Slice("\n".join(lines), 5, 8, ("GPIO",), kind="table")
    after = Slice("Use BSRR for atomic writes.", 10, 10, ("GPIO",))
    whole = chunk_slices([intro, table, after], ChunkConfig())
    assert len(whole) == 1  # small: everything packs into one chunk by default
    rows = chunk_slices([intro, table, after], ChunkConfig(row_tables=is_row_table))
    assert [c.text for c in rows] == [
        "GPIO registers\n\n" + "\n".join(lines[:3]),
        "\n".join([*lines[:2], lines[3]]) + "\n\nUse BSRR for atomic writes.",
    ]
    assert [(c.line_start, c.line_end) for c in rows] == [(3, 7), (8, 10)]


def test_other_tables_are_left_alone() -> None:
    lines = ["| Name | Colour |", "|---|---|", "| LD1 | red |", "| LD2 | green |"]
    table = Slice("\n".join(lines), 1, 4, kind="table")
    assert len(chunk_slices([table], ChunkConfig(row_tables=is_row_table))) == 1


def test_row_table_headers() -> None:
    for header in (
        "| Register | Offset |",
        "| Base address | Bus |",
        "| Bit field | Meaning |",
        "| Reset value |",
        "| Pin | Function |",
        "| 寄存器 | 复位值 |",
        "| 引脚 | 功能 |",
    ):
        assert is_row_table(header), header
    for header in ("| Name | Colour |", "| Spinner | Mapping |", "| 名称 | 说明 |"):
        assert not is_row_table(header), header
