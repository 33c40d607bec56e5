"""The ONNX cross-encoder reranker, on a small model folder built here.

No cross-encoder ships in any package we can install, so the test writes a
real folder in the layout users provide (``model.onnx`` + ``tokenizer.json``):
a word-level tokenizer with a BERT-style pair template, and an ONNX graph
that scores a (query, passage) pair by the cosine of their mean token
embeddings. It drives the real loading, tokenising and inference path.
"""

from __future__ import annotations

import numpy as np
import pytest

from clawkb.errors import ConfigError
from clawkb.kb import KnowledgeBase, TextRecord
from clawkb.retrieve.rerank import OnnxCrossEncoder

onnx = pytest.importorskip("onnx")
tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("onnxruntime")

WORDS = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "clock",
    "jitter",
    "pasta",
    "boil",
    "water",
    "ohm",
    "pair",
]


def build_folder(path):
    from onnx import TensorProto, helper, numpy_helper
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {w: i for i, w in enumerate(WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    tok.save(str(path / "tokenizer.json"))
    emb = np.eye(len(WORDS), dtype=np.float32)
    emb[:4] = 0  # specials carry no meaning
    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("Gather", ["E", "input_ids"], ["x"]),
        helper.make_node("Cast", ["token_type_ids"], ["tt"], to=f),
        helper.make_node("Cast", ["attention_mask"], ["am"], to=f),
        helper.make_node("Mul", ["tt", "am"], ["mb"]),
        helper.make_node("Sub", ["am", "mb"], ["ma"]),
        helper.make_node("Unsqueeze", ["ma", "ax2"], ["ma3"]),
        helper.make_node("Unsqueeze", ["mb", "ax2"], ["mb3"]),
        helper.make_node("Mul", ["x", "ma3"], ["xa"]),
        helper.make_node("Mul", ["x", "mb3"], ["xb"]),
        helper.make_node("ReduceSum", ["xa", "ax1"], ["sa"], keepdims=0),
        helper.make_node("ReduceSum", ["xb", "ax1"], ["sb"], keepdims=0),
        helper.make_node("LpNormalization", ["sa"], ["na"], axis=-1),
        helper.make_node("LpNormalization", ["sb"], ["nb"], axis=-1),
        helper.make_node("Mul", ["na", "nb"], ["prod"]),
        helper.make_node("ReduceSum", ["prod", "ax_last"], ["logits"], keepdims=1),
    ]
    ints = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["B", "T"])
        for n in ("input_ids", "attention_mask", "token_type_ids")
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_cross_encoder",
        ints,
        [helper.make_tensor_value_info("logits", f, ["B", 1])],
        [
            numpy_helper.from_array(emb, "E"),
            numpy_helper.from_array(np.array([1], np.int64), "ax1"),
            numpy_helper.from_array(np.array([2], np.int64), "ax2"),
            numpy_helper.from_array(np.array([-1], np.int64), "ax_last"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path / "model.onnx"))


def test_cross_encoder_scores_pairs(tmp_path):
    build_folder(tmp_path)
    ce = OnnxCrossEncoder(str(tmp_path))
    scores = ce.score("clock jitter", ["boil pasta water", "clock jitter pair", "jitter ohm"])
    assert scores.shape == (3,)
    assert int(np.argmax(scores)) == 1 and scores[0] == pytest.approx(0.0, abs=1e-6)
    assert scores[1] > scores[2] > scores[0]


def test_cross_encoder_as_pipeline_stage(tmp_path):
    build_folder(tmp_path)
    kb = KnowledgeBase.open(tmp_path / "kb", create=True)
    kb.index_texts(
        [
            TextRecord(path="a.md", text="# A\n\nclock clock clock pasta pasta pasta pasta"),
            TextRecord(path="b.md", text="# B\n\nclock"),
        ]
    )
    opts = {"rerank_options": {"folder": str(tmp_path)}}
    from clawkb.retrieve.pipeline import retriever_for

    r = retriever_for(kb)
    r.settings = r.settings.with_overrides(opts)
    plain = kb.search("clock", mode="lexical", merge=True)
    res = kb.search("clock", mode="lexical", rerank="onnx", explain=True)
    expected = OnnxCrossEncoder(str(tmp_path)).score("clock", [h.text for h in plain.hits])
    by_model = [plain.hits[i].anchor.path for i in np.argsort(-expected, kind="stable")]
    assert [h.anchor.path for h in res.hits] == by_model
    assert [h.score for h in res.hits] == pytest.approx(sorted(expected.tolist(), reverse=True))
    assert res.hits[0].explanation["rerank"]["model"] == "onnx"
    kb.close()


def test_missing_model_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"missing model\.onnx"):
        OnnxCrossEncoder(str(tmp_path))
