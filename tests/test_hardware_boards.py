"""Board inference for datasheet files."""

from __future__ import annotations

import pytest

from clawkb.hardware.boards import infer_board, normalize_board


@pytest.mark.parametrize(
    ("rel", "meta", "board"),
    [
        ("nucleo-f401re.md", None, "nucleo-f401re"),
        ("Arduino Uno.txt", None, "arduino-uno"),
        ("generic.md", None, ""),
        ("generic-i2c.md", None, ""),
        ("generic/i2c.md", None, ""),
        ("_generic/deep/uart.pdf", None, ""),
        ("esp32/notes/gpio.md", None, "esp32"),
        ("rpi/_generic/x.md", None, ""),
        ("stm32-registers.md", {"board": "nucleo-f401re"}, "nucleo-f401re"),
        ("nucleo.md", {"board": "generic"}, ""),
        ("generic/x.md", {"board": "Raspberry Pi Pico"}, "raspberry-pi-pico"),
        ("nucleo.md", {"board": ["a", "b"]}, "nucleo"),  # not a scalar: ignored
    ],
)
def test_infer_board(rel: str, meta: dict[str, object] | None, board: str) -> None:
    assert infer_board(f"/base/{rel}", "/base", meta) == board


def test_normalize_board() -> None:
    assert normalize_board(" Nucleo_F401RE ") == "nucleo-f401re"
    assert normalize_board("GENERIC") == ""
