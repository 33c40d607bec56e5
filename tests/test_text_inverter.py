"""Tokenizing and inverting chunk texts in one native pass (``TextInverter``)
builds the same segments as inverting the tokenizer's token lists, and a merge
that gives back its inputs' mapped pages writes the same segment."""

from __future__ import annotations

import filecmp
from pathlib import Path

import numpy as np
import pytest

from clawkb.index import packing
from clawkb.index.segment import (
    DocFields,
    DocTexts,
    Segment,
    _build_from_tokens,
    build_arrays,
    merge_segments,
    write_segment,
)
from clawkb.text.tokenize import NATIVE_INVERT

pytestmark = pytest.mark.skipif(
    not (NATIVE_INVERT and packing.NATIVE), reason="native tokenizer or packer not built"
)

SLICE = Path(__file__).parent / "data" / "esp-idf-slice"

#: Text the run cache and the C paths must get right: identifiers (split into
#: parts), stems, CJK runs glued to ASCII, full-width forms, non-ASCII words
#: (case-folded by Python), runs longer than the cache takes, tokens over 64
#: characters, a term repeated past 255 times in one field.
TRICKY = [
    "STM32F401RE 的 GPIO 配置: HAL_GPIO_WritePin(GPIOA, GPIO_PIN_5) at 0x4001_3000",
    "Pipelining pipelines PIPELINE; getHTTPResponse() v5.15.32 192.168.1.10 1_000_000",
    "ＳＴＭ３２ 走线阻抗 50Ω±10% ℃ Straße ÉCOLE naïve c++ c# drivers/net/eth.c",
    "x" * 70 + " " + "CONFIG_" + "A_" * 40 + " 中" * 3 + " DDR4走线",
    ("spam " * 300).strip(),
    "",
]


def _real_texts() -> list[str]:
    texts = []
    for path in sorted(SLICE.rglob("*.rst")):
        paras = path.read_text("utf-8").split("\n\n")
        texts.extend(p for p in paras if p.strip())
    return texts


def _docs(texts: list[str]) -> list[DocTexts]:
    docs = []
    for i, text in enumerate(texts):
        title = text.splitlines()[0][:80] if text else ""
        if i % 7 == 3:  # code chunks go to the code field
            docs.append(DocTexts(i + 1, title, "", text))
        else:
            docs.append(DocTexts(i + 1, title if i % 5 else "", text, ""))
    return docs


def _same(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert np.array_equal(x, y)


def test_text_inverter_builds_the_token_list_segment() -> None:
    texts = TRICKY + _real_texts() + TRICKY  # the second time, every run comes from the cache
    assert len(texts) > 100
    docs = _docs(texts)
    streamed = build_arrays(iter(docs))
    _same(streamed, _build_from_tokens(d.fields() for d in docs))
    # token lists through the native inverter, and a mixed batch, give the same too
    _same(streamed, build_arrays(d.fields() for d in docs))
    mixed = [d.fields() if i % 2 else d for i, d in enumerate(docs)]
    _same(streamed, build_arrays(iter(mixed)))
    # field lengths are token counts
    lens = streamed[1]
    for d, row in zip(docs[:20], lens[:20], strict=False):
        f = d.fields()
        assert list(row) == [len(f.title), len(f.body), len(f.code)]
    assert int(lens[4][1]) == 300 and streamed[5].max() == 255  # tf saturates at 255


def test_text_inverter_survives_its_run_cache_filling_up() -> None:
    # more distinct runs than the cache holds (it is cleared and refilled);
    # numbers keep it quick (the token-list side makes no Python calls for them)
    words = [str(1_000_000 + 7 * i) for i in range(140_000)]
    texts = [" ".join(words[i : i + 2000]) for i in range(0, len(words), 2000)]
    texts += texts[:3]
    docs = _docs(texts)
    _same(build_arrays(iter(docs)), _build_from_tokens(d.fields() for d in docs))


def test_empty_batches_match() -> None:
    _same(build_arrays(iter([])), _build_from_tokens(iter([])))
    only_empty = [DocTexts(1, "", "", ""), DocTexts(2, "", "...", "")]
    _same(build_arrays(iter(only_empty)), _build_from_tokens(d.fields() for d in only_empty))


def test_merge_that_releases_mapped_pages_writes_the_same_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = _real_texts()
    segs = []
    for s in range(3):
        part = _docs(texts[s::3])
        docs = []
        for d in part:
            f = d.fields()
            docs.append(DocFields(1000 * s + d.chunk_id, f.title, f.body, f.code))
        write_segment(tmp_path / f"s{s}", *build_arrays(iter(docs)))
        seg = Segment(tmp_path / f"s{s}")
        seg.delete(np.array([1000 * s + i for i in range(1, 200, 9)], np.int64))
        segs.append(seg)
    assert all(packing._file_mapped(s.packed["packed"]) for s in segs)
    assert not packing._file_mapped(np.zeros(10, np.uint8))
    merge_segments(segs, tmp_path / "released")
    monkeypatch.setattr(packing, "_file_mapped", lambda arr: False)
    again = [Segment(tmp_path / f"s{s}") for s in range(3)]
    for seg, old in zip(again, segs, strict=True):
        seg.live = old.live
    merge_segments(again, tmp_path / "kept")
    names = sorted(f.name for f in (tmp_path / "kept").iterdir())
    assert names == sorted(f.name for f in (tmp_path / "released").iterdir())
    for name in names:
        assert filecmp.cmp(tmp_path / "kept" / name, tmp_path / "released" / name, shallow=False)
    # the released inputs still read the same (their pages come back from the file)
    for seg, fresh in zip(segs, again, strict=True):
        assert np.array_equal(seg.packed["packed"], fresh.packed["packed"])
