"""The native token estimate must equal the regex reference (text/estimate.py) exactly."""

from __future__ import annotations

import random

import pytest

from clawkb.text import estimate

native = pytest.importorskip("clawkb.text._chunknative")

SAMPLES = [
    "",
    "plain ascii words and a_long_identifier_name",
    "走线阻抗 50Ω±10% STM32F401RE 的 GPIO_Init()。",
    "ＳＴＭ３２ full-width, ｶﾀｶﾅ half-width, 한국어 텍스트, 𠀀𠀁 extension B",
    "tabs\tand\nnewlines\r\n  and   spaces\u3000ideographic",
    "digits ²³ ① Ⅻ ٣٤ and marks é ñ ß ǅ",
    "symbols: ~!@#$%^&*()_+{}|:\"<>?`-=[]\\;',./ ±°µ§¶",
    "emoji 🙂 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 letters",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_native_weight_equals_reference(text: str) -> None:
    assert native.weight(text) == estimate._weight_python(text)


def test_native_weight_of_a_range_equals_the_slice() -> None:
    rng = random.Random(7)
    text = " ".join(SAMPLES)
    for _ in range(500):
        a = rng.randint(0, len(text))
        b = rng.randint(a, len(text))
        assert native.weight(text, a, b) == estimate._weight_python(text[a:b])
    assert native.weight(text, 0, len(text) + 10) == estimate._weight_python(text)


def test_every_code_point_is_classed_like_the_regexes() -> None:
    """Every code point alone, inside a word and repeated (CJK, word, space and
    symbol classes, word lengths around the 5-character step), in blocks of 256
    space-separated samples so the reference's regexes run once per block.
    Planes 0-3 and 14 (every assigned code point outside private use)."""
    for lo in [*range(0, 0x40000, 256), *range(0xE0000, 0xE1000, 256)]:
        chars = [chr(cp) for cp in range(lo, lo + 256)]
        for form in ("{}", "abcd{}ef", "{}{}{}{}{}{}"):
            text = " ".join(form.format(*[ch] * form.count("{}")) for ch in chars)
            if native.weight(text) != estimate._weight_python(text):
                pytest.fail(f"block U+{lo:04X} ({form!r}) differs")


def test_random_mixtures_agree() -> None:
    rng = random.Random(3)
    alphabet = "ab_Z09 \n\t.,;-" + "走线阻抗" + "ＡＢ" + "é" + "\u3000" + "𠀀" + "²"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert native.weight(text) == estimate._weight_python(text)
