"""Tests for the shared document/query tokenizer (DESIGN D2).

The table pins down what engineers must be able to find; the properties pin
down what must hold for any input (no crash, determinism, queries built from
a document's own words never carry tokens the document lacks).
"""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clawkb.text import TOKENIZER_VERSION, normalize, tokenize
from clawkb.text.tokenize import MAX_TOKEN_LEN, stem_of

# (input, tokens that must be present). Order-insensitive subset checks.
CONTAINS: list[tuple[str, set[str]]] = [
    ("走线阻抗", {"走", "线", "阻", "抗", "走线", "线阻", "阻抗"}),
    ("STM32F401RE 的时钟", {"stm32f401re", "stm32", "f401", "stm", "32", "401", "re", "时钟"}),
    ("GPIOA 基地址 0x4001_3000", {"0x4001_3000", "0x40013000", "40013000", "0x4001", "3000"}),
    ("寄存器地址 0x40013000。", {"0x40013000", "40013000", "寄存", "存器"}),
    ("0xFF", {"0xff", "ff"}),
    ("0XdeadBEEF", {"0xdeadbeef", "deadbeef"}),
    ("CONFIG_SMP=y", {"config_smp", "config", "smp", "y"}),
    ("I2C_SCL 引脚", {"i2c_scl", "i2c", "scl", "引脚"}),
    ("Linux v5.15.32 内核", {"v5.15.32", "5.15.32", "5.15", "v5", "15", "32", "内核"}),
    ("供电 3.3V", {"3.3v", "3.3", "供电"}),
    ("阻抗50Ω±10%", {"50ω", "50", "ω", "10", "阻抗"}),
    ("tolerance ±10%", {"tolerance", "10"}),
    ("drivers/net/eth.c", {"drivers/net/eth.c", "drivers", "net", "eth.c", "eth"}),
    ("HAL_GPIO_WritePin(GPIOA, GPIO_PIN_5)", {"hal_gpio_writepin", "write", "pin", "gpio_pin_5"}),
    ("snake_case_name", {"snake_case_name", "snake", "case", "name"}),
    ("getHTTPResponse", {"gethttpresponse", "get", "http", "response"}),
    ("foo.bar()", {"foo.bar", "foo", "bar"}),
    ("version 1.2.3", {"1.2.3", "1.2", "1", "2", "3"}),
    ("ping 192.168.1.10", {"192.168.1.10", "192.168.1", "192.168", "10"}),
    ("100MHz 时钟", {"100mhz", "100", "mhz", "时钟"}),
    ("C1 = 2.2uF", {"c1", "2.2uf", "2.2", "uf"}),
    ("上拉电阻 10kΩ", {"10kω", "10", "kω", "上拉", "电阻"}),
    ("DDR4走线", {"ddr4", "走线", "走", "线"}),
    ("ＳＴＭ３２ ＧＰＩＯ", {"stm32", "gpio"}),
    ("全角：ＣＯＮＦＩＧ＿ＳＭＰ", {"config_smp", "config", "smp", "全角"}),
    ("The end.", {"the", "end"}),
    ("x86_64 ARMv7 IPv4", {"x86_64", "x86", "armv7", "arm", "ipv4"}),
    ("C++ and C#", {"c++", "c#", "and"}),
    ("std::vector<int>", {"std::vector", "std", "vector", "int"}),
    ("https://github.com/foo/bar.git", {"github.com", "github", "bar.git", "bar"}),
    ("RCC_APB2ENR |= 1", {"rcc_apb2enr", "rcc", "apb2enr", "apb2", "enr", "1"}),
    ("1_000_000 ops", {"1_000_000", "1000000", "ops"}),
    ("2024-01-05 release", {"2024-01-05", "2024", "01", "05", "release"}),
    ("rk3588-evb 开发板", {"rk3588-evb", "rk3588", "evb", "开发", "发板"}),
    ("Cortex-M4 内核", {"cortex-m4", "cortex", "m4"}),
    ("温度 -40℃", {"40°c", "40", "温度"}),
    ("(see §3) [note]", {"see", "3", "note"}),
    ("E_NOTFOUND 😀 fix🚀bug", {"e_notfound", "notfound", "fix", "bug"}),
    ("Straße STRASSE", {"strasse"}),
    ("カタカナ テスト", {"カ", "タ", "カタ", "テス"}),
    ("한국어 문서", {"한국", "국어", "문서"}),
    ("“引号”与（括号）", {"引号", "与", "括号"}),
    ("__init__.py", {"init__.py", "init", "py"}),
    ("~/.bashrc", {"bashrc"}),
    ("MAC 00:1A:2B:3C:4D:5E", {"00:1a:2b:3c:4d:5e", "00", "1a", "5e"}),
]

# (input, the exact token list, in order).
EXACT: list[tuple[str, list[str]]] = [
    ("", []),
    ("   \t\n ", []),
    ("。，！？；：、“”（）《》【】", []),
    ("... --- !!! ???", []),
    ("😀🚀", []),
    ("hello world", ["hello", "world"]),
    ("Hello, World!", ["hello", "world"]),
    ("走线阻抗", ["走", "线", "阻", "抗", "走线", "线阻", "阻抗"]),
    ("阻抗。匹配", ["阻", "抗", "阻抗", "匹", "配", "匹配"]),
    ("CONFIG_SMP", ["config_smp", "config", "smp"]),
    ("I2C_SCL", ["i2c_scl", "i2c", "2", "scl"]),
    (
        "STM32F401RE",
        ["stm32f401re", "stm", "32", "stm32", "401", "f401", "re"],
    ),
    (
        "0x4001_3000",
        ["0x4001_3000", "0x40013000", "4001_3000", "40013000", "0x4001", "4001", "3000"],
    ),
    (
        "HAL_GPIO_WritePin",
        ["hal_gpio_writepin", "hal", "gpio", "writepin", "write", "pin"],
    ),
    ("drivers/net/eth.c", ["drivers/net/eth.c", "drivers", "net", "eth.c", "eth"]),
    ("50Ω±10%", ["50ω±10", "50ω", "50", "ω", "10"]),
    ("DDR4走线", ["ddr4", "ddr", "4", "走", "线", "走线"]),
    ("a a a", ["a", "a", "a"]),
]


@pytest.mark.parametrize(("text", "expected"), CONTAINS)
def test_important_tokens_present(text: str, expected: set[str]) -> None:
    assert expected <= set(tokenize(text))


@pytest.mark.parametrize(("text", "expected"), EXACT)
def test_exact_tokens(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


def test_table_is_large_enough() -> None:
    assert len(CONTAINS) + len(EXACT) >= 40


@pytest.mark.parametrize(
    ("query", "document"),
    [
        ("0x40013000", "base 0x4001_3000"),
        ("STM32", "STM32F401RE datasheet"),
        ("F401", "STM32F401RE"),
        ("5.15", "kernel v5.15.32"),
        ("50Ω", "阻抗50Ω±10%"),
        ("±10%", "阻抗50Ω±10%"),
        ("3.3V", "供电3.3V"),
        ("eth.c", "drivers/net/eth.c"),
        ("WritePin", "HAL_GPIO_WritePin"),
        ("writepin", "HAL_GPIO_WritePin"),
        ("线阻", "走线阻抗"),
        ("ＣＯＮＦＩＧ＿ＳＭＰ", "CONFIG_SMP=y"),
        ("uF", "2.2uF"),
    ],
)
def test_query_tokens_found_in_document(query: str, document: str) -> None:
    assert set(tokenize(query)) <= set(tokenize(document))


def test_hex_with_underscores_still_meets_plain_hex() -> None:
    query = set(tokenize("0x4001_3000"))
    assert {"0x40013000", "40013000"} <= query & set(tokenize("base 0x40013000"))


def test_cjk_punctuation_never_a_token() -> None:
    tokens = tokenize("电源。输入，输出！“引号”、（括号）《书名》【注】：；？")
    assert all(len(t) <= 2 for t in tokens)
    assert not set("。，！“”、（）《》【】：；？") & {c for t in tokens for c in t}


def test_single_ascii_letter_parts_dropped_but_whole_letters_kept() -> None:
    assert "f" not in tokenize("STM32F401RE")
    assert "c" not in tokenize("eth.c")
    assert tokenize("x") == ["x"]


def test_overlong_token_dropped_but_parts_kept() -> None:
    long_ident = "_".join(["segment"] * 12)
    assert len(long_ident) > MAX_TOKEN_LEN
    tokens = tokenize(long_ident)
    assert long_ident not in tokens
    assert tokens == ["segment"]
    assert tokenize("a" * (MAX_TOKEN_LEN + 1)) == []
    assert tokenize("a" * MAX_TOKEN_LEN) == ["a" * MAX_TOKEN_LEN]


def test_repeated_runs_give_the_same_tokens_every_time() -> None:
    text = "WritePin 走线 0x4001_3000 " * 3
    once = tokenize("WritePin 走线 0x4001_3000")
    assert tokenize(text) == once * 3


def test_normalize_folds_width_and_case() -> None:
    assert normalize("ＳＴＭ３２Ｆ４") == "stm32f4"
    assert normalize("\u2126") == normalize("\u03a9") == "\u03c9"  # ohm sign, omega
    assert normalize("Straße") == "strasse"
    assert normalize("℃") == "°c"


def test_version_is_declared() -> None:
    assert TOKENIZER_VERSION == "2"


# ---------------------------------------------------------------- properties

_IDENTIFIERS = [
    "STM32F401RE",
    "0x4001_3000",
    "CONFIG_SMP",
    "I2C_SCL",
    "v5.15.32",
    "3.3V",
    "50Ω±10%",
    "drivers/net/eth.c",
    "HAL_GPIO_WritePin",
    "foo.bar()",
    "192.168.1.10",
    "100MHz",
    "2.2uF",
    "10kΩ",
    "end.",
    "DDR4走线",
    "ＧＰＩＯ",
    "C++",
]
_CJK_TEXT = st.text(alphabet="走线阻抗匹配电源时钟寄存器引脚の한국カ", min_size=1, max_size=8)
_ASCII_WORD = st.text(alphabet="abcXYZ019_.-/:%+#()", min_size=1, max_size=10)
# Ordinary engineering text: ASCII, CJK, CJK punctuation, full-width forms,
# units, emoji. (Exotic combining marks whose case-folding turns them into
# letters are left out on purpose: see the module docstring.)
_REALISTIC = st.text(
    alphabet=st.sampled_from(
        list("abcxyzABCXYZ0123456789 _.-/:,;%+#()[]±°Ωµß\t\n")
        + list("走线阻抗电源。，！？、“”（）ＡＢａｂ０１＿")
        + ["😀", "℃", "Ⅻ", "①"]
    ),
    max_size=60,
)
_WORDS = st.lists(
    st.one_of(st.sampled_from(_IDENTIFIERS), _CJK_TEXT, _ASCII_WORD), min_size=1, max_size=8
)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_text_gives_clean_deterministic_tokens(text: str) -> None:
    tokens = tokenize(text)
    assert tokens == tokenize(text)
    for token in tokens:
        assert isinstance(token, str)
        assert token
        assert len(token) <= MAX_TOKEN_LEN
        assert not any(c.isspace() for c in token)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_nfkc_variants_tokenize_alike(text: str) -> None:
    assert tokenize(unicodedata.normalize("NFKC", text)) == tokenize(text)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_normalize_is_idempotent(text: str) -> None:
    once = normalize(text)
    assert normalize(once) == once


@settings(max_examples=200, deadline=None)
@given(_REALISTIC)
def test_normalized_query_never_has_tokens_the_original_lacks(text: str) -> None:
    # but stems: lower-casing makes a CamelCase run a plain word, which gets one
    extra = set(tokenize(normalize(text))) - set(tokenize(text))
    assert extra <= {stem_of(t) for t in tokenize(normalize(text))}


@settings(max_examples=200, deadline=None)
@given(_REALISTIC.filter(lambda s: s == s.lower()))
def test_normalized_lowercase_text_tokenizes_identically(text: str) -> None:
    assert tokenize(normalize(text)) == tokenize(text)


@settings(max_examples=200, deadline=None)
@given(_WORDS)
def test_tokens_of_a_text_are_the_tokens_of_its_words(words: list[str]) -> None:
    expected = [token for word in words for token in tokenize(word)]
    assert tokenize(" ".join(words)) == expected


@settings(max_examples=200, deadline=None)
@given(_WORDS, st.data())
def test_query_from_document_words_is_covered(words: list[str], data: st.DataObject) -> None:
    document = set(tokenize(" ".join(words)))
    start = data.draw(st.integers(0, len(words) - 1))
    stop = data.draw(st.integers(start + 1, len(words)))
    assert set(tokenize(" ".join(words[start:stop]))) <= document


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="走线阻抗匹配电源时钟寄存器引脚", min_size=1, max_size=30), st.data())
def test_any_substring_of_a_cjk_run_is_covered(run: str, data: st.DataObject) -> None:
    document = set(tokenize(f"see {run} here"))
    start = data.draw(st.integers(0, len(run) - 1))
    stop = data.draw(st.integers(start + 1, len(run)))
    assert set(tokenize(run[start:stop])) <= document


@given(st.from_regex(r"[a-z]{1,20}", fullmatch=True))
@settings(max_examples=100, deadline=None)
def test_plain_lowercase_word_is_its_own_token(word: str) -> None:
    stem = stem_of(word) if word.isascii() else ""
    assert tokenize(word) == ([word, stem] if stem else [word])


def test_english_word_forms_meet_on_their_stem() -> None:
    assert "pipelin" in tokenize("pipelining") and "pipelin" in tokenize("Pipeline")
    assert tokenize("drivers") == ["drivers", "driver"]  # the exact form stays first
    assert tokenize("news ran") == ["news", "ran"]  # stem equal or word short: nothing added


def test_identifiers_are_never_stemmed() -> None:
    for ident in ("CONFIG_ESP_WIFI_ENABLED", "ObserverEvent", "iPhone", "eth.c", "STM32F401RE"):
        toks = tokenize(ident)
        assert not any(t in {"enabl", "observ", "observerev", "iphon"} for t in toks), toks
    assert tokenize("ObserverEvent") == ["observerevent", "observer", "event"]
