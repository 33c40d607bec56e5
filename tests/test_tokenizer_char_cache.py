"""The native tokenizer's cache of one-character CJK tokens never changes tokens."""

from __future__ import annotations

import importlib

import pytest

tok = importlib.import_module("clawkb.text.tokenize")
if not tok.NATIVE_TOKENIZER:
    pytest.skip("native tokenizer not built", allow_module_level=True)


def test_characters_sharing_a_cache_slot_stay_themselves() -> None:
    # U+4E00 and U+8E00 (and U+20000 and U+24000) map to the same slot of the
    # 16k-entry cache: alternating them must replace, never confuse, entries.
    pairs = [("\u4e00", "\u8e00"), ("\U00020000", "\U00024000"), ("走", chr(ord("走") ^ 0x4000))]
    for a, b in pairs:
        for text in (a, b, a + b, b + a, f"{a} {b} {a}", f"x{a}y{b}z"):
            for _ in range(2):
                assert tok.tokenize(text) == tok.tokenize_python(text), text


def test_cached_characters_are_equal_strings_in_every_position() -> None:
    text = "走线阻抗，线阻，走。阻抗匹配 DDR4走线 走"
    first = tok.tokenize(text)
    again = tok.tokenize(text)
    assert first == again == tok.tokenize_python(text)
    assert first.count("走") == 4 and first.count("线") == 3
