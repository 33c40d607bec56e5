"""Pin-alias parsing, normalisation, conflicts and query matching (pure functions).

The first tests port ZeroClaw's HardwareRag behaviours (key:value and table
forms, an empty section); the rest go beyond them.
"""

from __future__ import annotations

from clawkb.hardware.aliases import (
    PinAlias,
    extract_aliases,
    find_conflicts,
    is_pin,
    match_aliases,
    normalize_alias,
)
from clawkb.parsers.markdown import parse_markdown
from clawkb.parsers.text import TextParser


def aliases_of(md: str) -> dict[str, str]:
    return {a.alias: a.pin for a in extract_aliases(parse_markdown(md, "b.md").slices)}


def test_key_value_form() -> None:
    md = "## Pin Aliases\nred_led: 13\nbuiltin_led: 13\nuser_led: 5\n"
    assert aliases_of(md) == {"red_led": "13", "builtin_led": "13", "user_led": "5"}


def test_table_form() -> None:
    md = (
        "## Pin Aliases\n| alias | pin |\n|-------|-----|\n| red_led | 13 |\n| builtin_led | 13 |\n"
    )
    assert aliases_of(md) == {"red_led": "13", "builtin_led": "13"}


def test_no_section_gives_nothing() -> None:
    assert aliases_of("No aliases here\n\nred_led: 13\n") == {}
    assert aliases_of("## Pin Aliases\n\n## GPIO\nPin 13: LED\n") == {}


def test_header_order_extras_and_skipped_rows() -> None:
    md = (
        "# Board\n\n### 引脚别名\n\n"
        "| Port | Pin | Alias | Notes |\n|---|---|---|---|\n"
        "| A | PA5 | User LED | green |\n"
        "| B | not-a-pin | broken | - |\n"
        "| C | PC13 | `user_button` | - |\n"
    )
    found = extract_aliases(parse_markdown(md, "b.md").slices)
    assert [(a.alias, a.pin) for a in found] == [("user_led", "PA5"), ("user_button", "PC13")]
    assert dict(found[0].extra) == {"port": "A", "notes": "green"}
    assert dict(found[1].extra) == {"port": "C"}  # "-" is an empty cell
    assert found[0].line == 7 and found[0].heading_path == ("Board", "引脚别名")


def test_every_section_title_and_separator() -> None:
    for title in ("Pin Aliases", "Pin Alias", "Pins", "引脚别名", "引脚"):
        md = f"# B\n\n#### {title}\n\n- red led = D13\n- 红色LED：PA5\n"
        assert aliases_of(md) == {"red_led": "D13", "红色led": "PA5"}, title


def test_notes_after_pin_and_prose_ignored() -> None:
    md = "## Pins\n\nbuzzer: GPIO25  # passive buzzer\nNote: keep the LED active high.\nVoltage: 3.3V\n"
    found = extract_aliases(parse_markdown(md, "b.md").slices)
    assert [(a.alias, a.pin, dict(a.extra)) for a in found] == [
        ("buzzer", "GPIO25", {"note": "passive buzzer"})
    ]


def test_plain_text_section_title() -> None:
    text = "Board notes\n\nPin Aliases:\nred_led: 13\n\nuser_led = PA5\n\nThe end: really.\n"
    doc = TextParser().parse(text.encode(), "board.txt")
    found = extract_aliases(doc.slices)
    assert [(a.alias, a.pin, a.line) for a in found] == [
        ("red_led", "13", 4),
        ("user_led", "PA5", 6),
    ]


def test_normalisation_and_pins() -> None:
    assert normalize_alias("  Red LED ") == "red_led"
    assert normalize_alias("**status-led**") == "status_led"
    assert normalize_alias("红色LED") == "红色led"
    for pin in ("13", "PA5", "GPIO13", "D13", "GP25", "A0", "P0.13", "PB_5"):
        assert is_pin(pin), pin
    for bad in ("3.3V", "I2C1", "25 mA", "VDD", "", "PA"):
        assert not is_pin(bad), bad


def alias(board: str, name: str, pin: str, **extra: str) -> PinAlias:
    return PinAlias(board, name, pin, f"/ds/{board}.md", 1, extra=extra)


def test_conflicts_are_reported() -> None:
    aliases = [
        alias("uno", "red_led", "9"),
        alias("uno", "red_led", "10"),
        alias("pico", "red_led", "GP15"),
    ]
    conflicts = find_conflicts(aliases)
    assert len(conflicts) == 1
    assert conflicts[0].board == "uno" and "pin 9" in conflicts[0].describe()
    assert "pin 10" in conflicts[0].describe()


def test_query_matching_forms() -> None:
    aliases = [
        alias("nucleo", "red_led", "13"),
        alias("nucleo", "green_led", "12"),
        alias("nucleo", "红色led", "PA6"),
        alias("nucleo", "i2c1_scl", "PB8", function="I2C1_SCL"),
        alias("nucleo", "user_button", "PC13"),
    ]

    def names(q: str) -> list[str]:
        return [a.alias for a, _ in match_aliases(q, aliases)]

    for q in ("red led", "red_led", "Red LED", "turn on the RED-LED now"):
        assert names(q) == ["red_led"], q
    assert names("打开红色LED灯") == ["红色led"]
    assert names("I2C1 的 SCL 接哪个脚") == ["i2c1_scl"]  # via the function column
    assert names("what is on PC13") == ["user_button"]  # via a port-style pin
    assert names("blink an led") == []
    assert match_aliases("pc13", aliases)[0][1] == "pin"
