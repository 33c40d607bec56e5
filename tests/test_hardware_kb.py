"""Hardware mode end to end on a real KB: datasheet indexing, aliases, ranking, context, pins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from clawkb.cli.main import cli
from clawkb.errors import ConfigError
from clawkb.hardware import hardware_context, index_datasheets, list_pins, set_pin
from clawkb.kb import KnowledgeBase
from clawkb.store.hardware_repo import load_aliases

NUCLEO = """# Nucleo board

## Pin Aliases

| alias | pin | notes |
|-------|-----|-------|
| red_led | 13 | external |
| 红色LED | PA6 | 外接 |

## GPIO

Pin 13 drives the LED through a resistor. The blinky example toggles it.
"""
UNO = "# Uno\n\n## Pin Aliases\nred_led: 9\nbuiltin_led: 13\n\n## GPIO\nThe LED on pin 13 blinks.\n"
GENERIC = "# LEDs in general\n\nAn LED needs a series resistor; blink it slowly.\n"
REGS = """---
board: nucleo
---
# Registers

| Register | Offset | Reset value |
|----------|--------|-------------|
| GPIOA_MODER | 0x00 | 0xA800_0000 |
| GPIOA_OTYPER | 0x04 | 0x0000_0000 |
| GPIOA_OSPEEDR | 0x08 | 0x0C00_0000 |
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


@pytest.fixture()
def ds(tmp_path: Path) -> Path:
    return write(
        tmp_path / "datasheets",
        {"nucleo.md": NUCLEO, "uno.md": UNO, "generic/leds.md": GENERIC, "nucleo-regs.md": REGS},
    )


@pytest.fixture()
def kb(tmp_path: Path, ds: Path):  # type: ignore[no-untyped-def]
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        index_datasheets(kb, [], [ds])
        yield kb


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_load_and_retrieve(kb: KnowledgeBase) -> None:
    boards = dict(kb.conn.execute("SELECT path, board FROM documents").fetchall())
    assert {Path(p).name: b for p, b in boards.items()} == {
        "nucleo.md": "nucleo",
        "uno.md": "uno",
        "leds.md": "",
        "nucleo-regs.md": "nucleo",
    }
    res = kb.search("led", boards=["nucleo"], limit=5)
    assert res.hits
    ctx = hardware_context(kb, "red led", ["nucleo"])
    assert [a["text"] for a in ctx["aliases"]] == ["nucleo: red_led = pin 13 (notes: external)"]
    assert "pin 13" in ctx["aliases"][0]["text"]


def test_aliases_are_traceable(kb: KnowledgeBase) -> None:
    (a,) = [x for x in load_aliases(kb.conn, ["nucleo"]) if x.alias == "red_led"]
    assert a.path.endswith("/nucleo.md") and a.line == 7
    assert a.heading_path == ("Nucleo board", "Pin Aliases")
    row = kb.chunk(a.anchor or "")
    assert row.line_start <= 7 <= row.line_end and "red_led" in row.text


def test_aliases_follow_file_edits_and_removal(kb: KnowledgeBase, ds: Path) -> None:
    (ds / "uno.md").write_text(UNO.replace("red_led: 9", "red_led: 10"), encoding="utf-8")
    index_datasheets(kb, [], [ds])
    pins = {a.alias: a.pin for a in load_aliases(kb.conn, ["uno"]) if a.board == "uno"}
    assert pins == {"red_led": "10", "builtin_led": "13"}
    (ds / "uno.md").unlink()
    kb.index([ds])  # a plain run over the folder keeps datasheet semantics
    assert [a for a in load_aliases(kb.conn) if a.board == "uno"] == []


def test_board_boost_is_exact_and_explained(kb: KnowledgeBase) -> None:
    plain = kb.search("LED pin 13", limit=10, explain=True)
    boosted = kb.search("LED pin 13", limit=10, boards=["uno"], explain=True)
    by_anchor = {h.anchor.id: h.score for h in plain.hits}
    for h in boosted.hits:
        exp = h.explanation or {}
        factor = 1.5 if exp["board"]["board"] == "uno" else 1.0
        assert exp["board"]["boost"] == factor
        assert h.score == pytest.approx(by_anchor[h.anchor.id] * factor, rel=1e-5)
    assert Path(boosted.hits[0].anchor.path).name == "uno.md"
    assert [h.rank for h in boosted.hits] == list(range(1, len(boosted.hits) + 1))
    assert sorted(h.score for h in boosted.hits) == sorted(h.score for h in boosted.hits)


def test_board_only_keeps_board_and_generic(kb: KnowledgeBase, tmp_path: Path) -> None:
    notes = write(tmp_path / "notes", {"blink.md": "# Blink\n\nblink the LED with a resistor\n"})
    kb.index([notes])
    names = {Path(h.anchor.path).name for h in kb.search("blink LED resistor", limit=20).hits}
    assert {"blink.md", "uno.md", "leds.md"} <= names
    only = kb.search("blink LED resistor", limit=20, boards=["nucleo"], board_only=True)
    assert {Path(h.anchor.path).name for h in only.hits} <= {
        "nucleo.md",
        "nucleo-regs.md",
        "leds.md",
    }
    assert "leds.md" in {Path(h.anchor.path).name for h in only.hits}


def test_unknown_board_is_a_clear_error(kb: KnowledgeBase) -> None:
    with pytest.raises(ConfigError, match=r"unknown board 'nucelo' \(known boards: nucleo, uno\)"):
        kb.search("led", boards=["nucelo"])


def test_register_rows_are_chunks(kb: KnowledgeBase) -> None:
    hit = kb.search("GPIOA_OSPEEDR reset value", boards=["nucleo"], limit=1).hits[0]
    assert "0x0C00_0000" in hit.text and "| Register | Offset | Reset value |" in hit.text
    assert "GPIOA_MODER" not in hit.text and hit.anchor.line_start == hit.anchor.line_end == 10


def test_register_rows_only_for_datasheets(tmp_path: Path) -> None:
    notes = write(tmp_path / "notes", {"regs.md": REGS})
    with KnowledgeBase.open(tmp_path / "kb2", create=True) as kb:
        kb.index([notes])
        hit = kb.search("GPIOA_OSPEEDR", limit=1).hits[0]
        assert "GPIOA_MODER" in hit.text  # a note's table stays one chunk
        assert kb.conn.execute("SELECT board FROM documents").fetchone()[0] is None
        index_datasheets(kb, [], [notes])  # the folder becomes a datasheet folder: re-parsed
        hit = kb.search("GPIOA_OSPEEDR", limit=1).hits[0]
        assert "GPIOA_MODER" not in hit.text
        assert kb.conn.execute("SELECT board FROM documents").fetchone()[0] == "nucleo"


def test_config_datasheets_entry(tmp_path: Path, ds: Path) -> None:
    home = tmp_path / "proj" / ".clawkb"
    home.mkdir(parents=True)
    (home / "config.yaml").write_text(f"datasheets: [{ds}]\nboard_boost: 2.0\n", encoding="utf-8")
    res = run("--kb", str(home), "index")
    assert res.exit_code == 0, res.output
    assert "added 4" in res.output
    res = run("--kb", str(home), "search", "LED", "--board", "uno", "--explain", "-n", "1")
    assert "board uno: x2.0" in res.output
    (home / "config.yaml").write_text("datasheets: 7\n", encoding="utf-8")
    res = run("--kb", str(home), "index")
    assert res.exit_code == 2 and "'datasheets' must be a folder" in res.output


def test_index_without_anything_is_an_error(tmp_path: Path) -> None:
    res = run("--kb", str(tmp_path / "kb"), "index")
    assert res.exit_code == 2 and "nothing to index" in res.output
    res = run("--kb", str(tmp_path / "kb"), "index", "--datasheets", str(tmp_path / "nope"))
    assert res.exit_code == 2 and "not a folder" in res.output


def test_cli_context_text_and_json(kb: KnowledgeBase) -> None:
    home = str(kb.home)
    res = run("--kb", home, "context", "turn on red led", "--board", "nucleo", "--board", "uno")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0] == "[Pin aliases for query]"
    assert lines[1].startswith("nucleo: red_led = pin 13") and lines[2].startswith(
        "uno: red_led = pin 9"
    )
    assert "[Hardware documentation]" in lines
    assert all("#" in ln for ln in lines if ln.startswith("--- "))
    res = run("--kb", home, "context", "打开红色LED", "--board", "nucleo", "--json", "-n", "2")
    data = json.loads(res.output)
    assert [(a["alias"], a["pin"]) for a in data["aliases"]] == [("红色led", "PA6")]
    assert 0 < len(data["passages"]) <= 2 and data["passages"][0]["board"] in ("nucleo", "")
    res = run("--kb", home, "context", "zzzqqq", "--board", "uno")
    assert res.exit_code == 1 and "no pin alias or datasheet passage" in res.output


def test_conflicting_aliases_are_reported(kb: KnowledgeBase, ds: Path) -> None:
    (ds / "uno-extra.md").write_text(
        "---\nboard: uno\n---\n## Pins\nred_led: 11\n", encoding="utf-8"
    )
    index_datasheets(kb, [], [ds])
    assert any(
        "red_led" in c and "pin 9" in c and "pin 11" in c for c in list_pins(kb, "uno")["conflicts"]
    )
    ctx = hardware_context(kb, "red led", ["uno"])
    assert len(ctx["aliases"]) == 2 and len(ctx["conflicts"]) == 1
    res = run("--kb", str(kb.home), "pins", "uno")
    assert "conflict: uno: alias 'red_led' has 2 pins" in res.output


def test_pins_set_updates_the_file_and_next_query(kb: KnowledgeBase, ds: Path) -> None:
    edit = set_pin(kb, "uno", "Red LED", "6")
    assert edit.previous == "9" and edit.path.endswith("/uno.md")
    assert "red_led: 6" in (ds / "uno.md").read_text(encoding="utf-8")
    assert hardware_context(kb, "red led", ["uno"])["aliases"][0]["pin"] == "6"
    edit = set_pin(kb, "nucleo", "green led", "PA7")  # appended to the existing table
    text = (ds / "nucleo.md").read_text(encoding="utf-8")
    assert "| green_led | PA7 |  |" in text and edit.line == 9
    assert [a["alias"] for a in hardware_context(kb, "green led", ["nucleo"])["aliases"]] == [
        "green_led"
    ]


def test_pins_set_creates_a_devices_file(kb: KnowledgeBase, ds: Path) -> None:
    res = run("--kb", str(kb.home), "pins", "set", "esp32-devkitc", "status led", "GPIO2")
    assert res.exit_code == 0, res.output
    assert "esp32-devkitc: status_led = pin GPIO2" in res.output
    created = (ds / "esp32-devkitc.md").read_text(encoding="utf-8")
    assert "## Pin Aliases" in created and "| status_led | GPIO2 |" in created
    res = run("--kb", str(kb.home), "pins", "--json")
    listing = json.loads(res.output)
    assert listing["boards"]["esp32-devkitc"][0]["anchor"]
    res = run("--kb", str(kb.home), "pins", "set", "uno", "led", "3.3V")
    assert res.exit_code == 2 and "not a pin number or port name" in res.output
    res = run("--kb", str(kb.home), "pins", "set", "uno", "led")
    assert res.exit_code == 2 and "usage: clawkb pins set BOARD ALIAS PIN" in res.output


def test_pins_set_needs_a_datasheet_folder(tmp_path: Path) -> None:
    with (
        KnowledgeBase.open(tmp_path / "kb", create=True) as kb,
        pytest.raises(ConfigError, match="no datasheet folder"),
    ):
        set_pin(kb, "uno", "led", "13")


def test_empty_datasheet_folder(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        report = index_datasheets(kb, [], [tmp_path / "empty"])
        assert report.added == 0
        assert list_pins(kb) == {"boards": {}, "conflicts": []}
        ctx = hardware_context(kb, "red led")
        assert ctx["aliases"] == [] and ctx["passages"] == []
    res = run("--kb", str(tmp_path / "kb"), "context", "red led")
    assert res.exit_code == 1
