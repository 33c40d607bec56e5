"""The native tokenizer (text/_toknative.c) against the Python reference.

The reference (``tokenize_python``) is the oracle: for every input both must
give the same tokens in the same order. Checked on the tokenizer's own tables,
on random text biased towards the tricky parts (CJK boundaries, separators,
identifiers, case, NFKC forms, long tokens), and on every text the tests and
examples ship (plus a slice of the shared datasets when they are present).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.test_tokenizer import _IDENTIFIERS, CONTAINS, EXACT

tok = importlib.import_module("clawkb.text.tokenize")

pytestmark = pytest.mark.skipif(
    not tok.NATIVE_TOKENIZER, reason="native tokenizer not built (no C compiler at install)"
)

ROOT = Path(__file__).resolve().parent.parent


def native(text: str, cache: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    """The C path with caches of its own (so runs are not served by earlier tests)."""
    return tok._native.tokenize(
        tok.nfkc(text), {} if cache is None else cache, tok._expand_run, {}, tok.stem_of
    )


def assert_same(text: str) -> None:
    expected = tok.tokenize_python(text)
    assert native(text) == expected, text
    assert tok.tokenize(text) == expected, text


@pytest.mark.parametrize("text", [t for t, _ in CONTAINS] + [t for t, _ in EXACT])
def test_tables_identical(text: str) -> None:
    assert_same(text)


EDGES = [
    "end. start: (x) y, z;",
    "a",
    "A",
    "Ab",
    "AB",
    "aB",
    "ABc",
    "Ünïcödé ÜBER über Über ÜbEr",
    "Straße ǅungla ﬁle ﬃ",  # case-folding and ligatures change the length
    "١٢٣ ४५६ 123",  # non-ASCII decimal digits
    "²³ ½ Ⅻ ①",
    "x" * 64 + " " + "y" * 65 + " " + "Z" * 70 + " " + "1" * 65 + " " + "é" * 65,
    "ab" + "Cd" * 40,
    "c++ C++ c# ++x x++y #tag a#b",
    "foo-- --bar -- _x_ __init__ ___",
    "\u3005\u3006\u3007\u3008\u3020\u3021\u3029\u302a\u3030\u3031\u3035\u3036\u3037\u3038",
    "\u303c\u303d\u30a0\u30a1\u30fa\u30fb\u30fc\u30ff\u3100\u318f\u3190\u31a0\u31bf\u31c0",
    "\u1100\u11ff\u2e80\u2fdf\u2fe0\ua960\ua97f\uac00\ud7a3\ud7ff\uf900\ufaff\ufb00",
    "\U00020000\U0002a6df\U0003ffff\U00040000 𠀀𠀁abc",
    "\u00a1x\u00a7y\u00abz\u00b6w\u00b7v\u00bbu\u00bft\u00b5s\u00b0r",
    "\u2000a\u206fb\u2190c\u21ffd\u2500e\u257ff\u2580g",
    "\ufe10a\ufe1fb\ufe30c\ufe4fd\uff00e\uff0ff\uff1ag\uff20h\uff3bi\uff40j\uff5bk\uff65l",
    "tab\tnl\nvt\x0bff\x0ccr\rfs\x1cgs\x1dus\x1frs\x1enbsp\xa0em\u2003ideo\u3000end",
    "\u0085next\u2028line\u2029para",
    "e\u0301 a\u0308 ﬀ ㍱ ㎒ ℃ № ™",
    "走线DDR4阻抗50Ω±10%时钟STM32F401RE引脚CONFIG_SMP=y",
    "0x4001_3000。0XdeadBEEF，1_000_000、v5.15.32",
    "😀fix🚀bug 👍🏽 \U000e0001",
]


@pytest.mark.parametrize("text", EDGES)
def test_edge_cases_identical(text: str) -> None:
    assert_same(text)


_ALPHABET = (
    list("abcxyzABCXYZ0123456789 _.-/:,;%+#()[]{}<>=|!?*&^$'\"`~@\\±°Ωµß\t\n")
    + list("走线阻抗电源。，！？、“”（）《》ＡＢａｂ０１＿ー・カタ한국")
    + ["😀", "℃", "Ⅻ", "①", "é", "É", "e\u0301", "ǅ", "ﬁ", "İ", "١", "\u3000", "\u00a0"]
    + ["\u3005", "\u3007", "\u3008", "\u30a0", "\u30fb", "\u30fc", "\U00020001", "\u2e80"]
)
_MIXED = st.lists(
    st.one_of(
        st.sampled_from(_IDENTIFIERS),
        st.lists(st.sampled_from(_ALPHABET), max_size=12).map("".join),
    ),
    max_size=12,
).map(lambda parts: "".join(parts))


@settings(max_examples=400, deadline=None)
@given(_MIXED)
def test_random_mixed_text_identical(text: str) -> None:
    assert_same(text)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_random_unicode_identical(text: str) -> None:
    assert_same(text)


def test_cache_never_changes_the_output() -> None:
    text = "HAL_GPIO_WritePin end. STM32F401RE 走线 " * 3
    cache: dict[str, tuple[str, ...]] = {}
    first = native(text, cache)
    assert cache  # complex runs were memoised
    assert native(text, cache) == first == tok.tokenize_python(text)


def test_python_fallback_when_native_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tok, "_native", None)
    assert tok.tokenize("STM32F401RE 走线") == tok.tokenize_python("STM32F401RE 走线")


def _shipped_texts() -> list[str]:
    texts: list[str] = []
    for path in sorted((ROOT / "tests" / "data").rglob("*.jsonl")):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                texts += [str(row.get(key, "")) for key in ("title", "text")]
    for path in sorted((ROOT / "examples").rglob("*")):
        if path.is_file() and path.suffix in {".md", ".txt", ".yaml", ".c", ".h", ".py"}:
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
    return texts


def test_shipped_data_identical() -> None:
    texts = _shipped_texts()
    assert len(texts) > 100
    for text in texts:
        assert native(text) == tok.tokenize_python(text)


SHARED = ROOT.parent / "shared" / "datasets"


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/datasets not present")
def test_shared_datasets_identical() -> None:
    """The first 300 documents and queries of each shared set."""
    checked = 0
    for corpus in sorted(SHARED.glob("*/corpus.jsonl")):
        for name in ("corpus.jsonl", "queries.jsonl"):
            with open(corpus.parent / name, encoding="utf-8") as fh:
                for _, line in zip(range(300), fh, strict=False):
                    row = json.loads(line)
                    for text in (str(row.get("title", "")), str(row.get("text", ""))):
                        assert native(text) == tok.tokenize_python(text)
                        checked += 1
    assert checked


def test_threads_tokenizing_at_once_each_keep_their_own_stemmer() -> None:
    """The stemmer is Python, so another thread runs while one call waits for it
    (`serve`: reader threads and the writer tokenize at once). Each call keeps its
    own stemmer and memo: every thread gets the tokens a lone call gives (before,
    the shared pair was reset by the other call: a crash or tokens without stems)."""
    import threading
    import time

    native = pytest.importorskip("clawkb.text._toknative")

    def stem(word: str) -> str:
        time.sleep(0)  # let another thread run here, as a busy server does
        return tok.stem_of(word)

    texts = [
        f"configuring timers {i}: the timer configures clocks and dividers, resets "
        f"pipelining stages; GPIO{i} esp_wifi_init() 阻抗走线 running queues"
        for i in range(12)
    ]
    want = [native.tokenize(t, {}, tok._expand_run, {}, tok.stem_of) for t in texts]
    assert any(len(w) > len(t.split()) for w, t in zip(want, texts, strict=True))  # stems added
    wrong: list[str] = []

    def work(k: int) -> None:
        memo: dict[str, str] = {}
        for n in range(150):
            i = (k + n) % len(texts)
            if (
                native.tokenize(texts[i], {}, tok._expand_run, memo if n % 2 else {}, stem)
                != want[i]
            ):
                wrong.append(texts[i])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong
