"""The dense channel of a cross-lingual query searches its glossary translation.

A real KB on small English and Chinese notes, real e5-small vectors.
"""

from __future__ import annotations

import numpy as np
import pytest

from clawkb.kb import KnowledgeBase, TextRecord
from clawkb.retrieve.crossling import DENSE_GATE, dense_text, translated_dense
from clawkb.retrieve.fusion import Channel
from clawkb.retrieve.rewrite import expand_query
from clawkb.text.glossary import bundled_glossary

ENGLISH = {
    "tunnel.md": "# Wind tunnel interference\n\nA systematic study of wind tunnel wall "
    "interference on models of different sizes, with corrections for blockage.",
    "plate.md": "# Shear flow\n\nThe boundary layer on a flat plate in a shear flow induces "
    "a pressure gradient along the plate.",
    "buckling.md": "# Creep buckling\n\nA theory of creep buckling of columns under a "
    "constant axial load at high temperature.",
    "ablation.md": "# Ablation in flight\n\nMeasurements of ablation rates of heat shields "
    "taken during re-entry flights.",
}
CHINESE = {
    f"zh{i}.md": f"# 研究笔记 {i}\n\n系统地研究了第{i}版平台的效应问题，以及界面的调整。"
    for i in range(5)
}


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    pytest.importorskip("onnxruntime")
    from clawkb.embed.run import embed_kb

    kb = KnowledgeBase.open(tmp_path_factory.mktemp("xl") / "kb", create=True)
    kb.index_texts([TextRecord(path=p, text=t) for p, t in {**ENGLISH, **CHINESE}.items()])
    embed_kb(kb)
    yield kb
    kb.close()


def test_dense_text_renders_the_query_in_the_other_language():
    g = bundled_glossary()
    assert dense_text("是否系统地研究过风洞干扰效应？", g) == "wind tunnel"
    # Latin words (part numbers) stay, the Chinese function words go
    text = dense_text("STM32 ROM 引导程序要求主机先发送的同步字节是什么？", g)
    assert text is not None and "bootloader" in text and "stm32" in text
    assert not any("\u4e00" <= c <= "\u9fff" for c in text)
    # English → Chinese: glossary terms replaced in place, acronyms kept
    text = dense_text("What differential impedance is required for DDR4 routing?", g)
    assert text is not None and "差分阻抗" in text and "ddr4" in text
    assert dense_text("What is BCPL?", g) is None  # nothing the glossary knows


def _dense_stage(res):
    return next(s for s in res.stages if s["stage"] == "dense")


def test_chinese_question_dense_channel_finds_the_english_passage(kb):
    q = "是否系统地研究过风洞干扰效应？"
    res = kb.search(q, limit=3, mode="hybrid", explain=True)
    assert "on the translation 'wind tunnel'" in _dense_stage(res)["note"]
    top = res.hits[0]
    assert top.anchor.path == "tunnel.md"
    assert top.explanation["channels"]["dense"]["rank"] == 1
    fusion = next(s for s in res.stages if s["stage"] == "fusion")
    assert "w_dense=1.0" in fusion["note"]
    # adaptive fusion off: the dense channel searches the question as asked
    plain = kb.search(q, limit=3, mode="hybrid", explain=True, adaptive=False)
    assert "translation" not in _dense_stage(plain)["note"]


def test_monolingual_query_keeps_its_own_dense_search(kb):
    res = kb.search(
        "creep buckling of columns", limit=3, mode="hybrid", explain=True, early_return=0
    )
    assert "translation" not in _dense_stage(res)["note"]
    assert res.hits[0].anchor.path == "buckling.md"


def test_translation_far_below_the_original_is_not_used(kb):
    rw = expand_query("是否系统地研究过风洞干扰效应？")
    from clawkb.retrieve.crossling import balance

    rw = balance(kb.lexical, rw)
    orig = Channel(np.array([7, 8], np.int64), np.array([0.9, 0.8]))
    worse = Channel(np.array([1, 2], np.int64), np.array([0.9 - DENSE_GATE - 0.01, 0.5]))
    better = Channel(np.array([1, 2], np.int64), np.array([0.89, 0.5]))
    g = bundled_glossary()
    asked: list[str] = []

    def search(text: str) -> Channel:
        asked.append(text)
        return worse

    assert translated_dense(kb.lexical, rw, g, orig, search) == (orig, None)
    assert asked == ["wind tunnel"]
    got, text = translated_dense(kb.lexical, rw, g, orig, lambda t: better)
    # a translation that passes the gate joins the original: both searches' first passages
    assert text == "wind tunnel" and set(got.ids.tolist()) == {1, 7}
    # a time-out of the second search keeps the first
    assert translated_dense(kb.lexical, rw, g, orig, lambda t: None) == (orig, None)
