"""`ask`'s fitted abstain model: the shipped file, its features on real KBs, the override."""

from __future__ import annotations

import json

import pytest

from clawkb.answer import answer
from clawkb.errors import ConfigError
from clawkb.kb import KnowledgeBase, TextRecord
from clawkb.retrieve.abstain_model import MODEL_PATH, Model, load_model, value

NOTES = {
    "can.md": "# CAN bus termination\n\nA CAN bus needs a 120 ohm termination resistor at each "
    "of its two ends; the resistance between CANH and CANL is then about 60 ohm.",
    "uart.md": "# Debug console\n\nThe debug UART runs at 1500000 baud on header J6 "
    "(GND / TX / RX, 3.3 V levels).",
    "ddr.md": "# DDR4 routing\n\nDifferential pairs (CLK, DQS) are routed at 100 ohm "
    "impedance, single-ended signals at 50 ohm, within 10 %.",
    "boot.md": "# Boot order\n\nThe BootROM scans SPI NOR, then eMMC, then the SD card, "
    "then USB maskrom mode.",
    "zh.md": "# 电源时序\n\nRK809 上电时先打开 BUCK1，再打开 BUCK2 和 LDO，间隔 2 毫秒。",
}
ANSWERABLE = [
    "What termination resistor does a CAN bus need?",
    "What baud rate does the debug UART use?",
    "RK809 上电时序是什么？",
]
UNANSWERABLE = [
    "What is the boiling point of ethanol?",
    "How do I reset my Gmail password?",
    "红烧肉怎么做才好吃？",
]


def test_shipped_model_loads_and_rewards_evidence() -> None:
    models = load_model()
    assert set(models) == {"lexical", "hybrid"}
    for m in models.values():
        assert 0 < m.threshold < 1 and len(m.coef) == len(m.features)
        weak = {"coverage": 0.1, "matched": 0.1, "lex_norm": 0.1}
        strong = {"coverage": 1.0, "matched": 1.0, "lex_norm": 1.5, "dconf": 1.0}
        assert m.probability(weak) < m.threshold < m.probability(strong)


def test_interaction_feature_is_a_product() -> None:
    assert value({"cjk": 0.5, "coverage": 0.8}, "cjk*coverage") == pytest.approx(0.4)
    assert value({"cjk": 0.5}, "missing") == 0.0


def test_bad_model_file_names_the_file(tmp_path) -> None:
    bad = tmp_path / "m.json"
    bad.write_text(json.dumps({"models": {"lexical": {"features": ["a"], "coef": []}}}))
    with pytest.raises(ConfigError, match=r"m.json \[lexical\]: bad abstain model"):
        load_model(str(bad))
    with pytest.raises(ConfigError, match="1 features"):
        Model({"features": ["a"], "coef": [1, 2], "intercept": 0, "threshold": 0.5}, "x")
    assert MODEL_PATH.is_file()


@pytest.fixture(scope="module")
def lexical_kb(tmp_path_factory):
    with KnowledgeBase.open(tmp_path_factory.mktemp("am") / "kb", create=True) as kb:
        kb.index_texts([TextRecord(path=p, text=t) for p, t in NOTES.items()])
        yield kb


@pytest.mark.parametrize("q", ANSWERABLE)
def test_answerable_questions_are_answered(lexical_kb, q) -> None:
    res = answer(lexical_kb, q, llm="none", explain=True)
    assert not res.abstained, res.confidence.to_dict() if res.confidence else None
    d = res.confidence.to_dict()  # type: ignore[union-attr]
    assert d["method"].startswith("logistic model") and "coverage" in d["features"]


@pytest.mark.parametrize("q", UNANSWERABLE)
def test_unanswerable_questions_abstain(lexical_kb, q) -> None:
    assert answer(lexical_kb, q, llm="none").abstained


def test_explicit_threshold_keeps_the_coverage_rule(lexical_kb) -> None:
    res = answer(lexical_kb, UNANSWERABLE[0], llm="none", min_confidence=0.0)
    assert res.confidence is not None and res.confidence.method == "coverage"
    assert res.confidence.threshold == 0.0 and not res.abstained  # the model would abstain
    assert res.confidence.features == {} and "features" not in res.confidence.to_dict()


def test_kb_with_vectors_uses_the_hybrid_model(tmp_path) -> None:
    pytest.importorskip("onnxruntime")
    from clawkb.embed.run import embed_kb

    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index_texts([TextRecord(path=p, text=t) for p, t in NOTES.items()])
        embed_kb(kb)
        models = load_model()
        used = set()
        for q in [*ANSWERABLE, *UNANSWERABLE]:
            res = answer(kb, q, llm="none")
            c = res.confidence
            assert c is not None
            # the dense channel ran: hybrid model; skipped by early return: lexical model
            kind = "hybrid" if c.features["cos"] > 0 else "lexical"
            used.add(kind)
            assert c.threshold == models[kind].threshold
            assert res.abstained == (q in UNANSWERABLE), (q, c.to_dict())
        assert "hybrid" in used


def test_spread_features_see_where_the_rare_terms_are(lexical_kb) -> None:
    from clawkb.retrieve.abstain import question_terms
    from clawkb.retrieve.abstain_model import spread

    q = "What termination resistor does a CAN bus need?"
    terms = question_terms(lexical_kb.lexical, q)
    right = NOTES["can.md"]
    others = [NOTES[n] for n in ("uart.md", "ddr.md", "boot.md", "zh.md")]
    one = spread(lexical_kb.lexical, q, terms, [right, *others])
    # one passage holds every term, the others none: full lead, the rare terms held
    assert one["cov2"] == pytest.approx(1.0) and one["cov5"] == pytest.approx(1.0)
    assert one["rare_hit"] == pytest.approx(1.0) and 0 < one["rare_idf"] <= 1.0
    # the same passage five times: no lead over the 2nd / 5th passage
    same = spread(lexical_kb.lexical, q, terms, [right] * 5)
    assert same["cov2"] == 0.0 and same["cov5"] == 0.0 and same["rare_hit"] == 1.0
    # passages without the question's terms: nothing held
    none = spread(lexical_kb.lexical, q, terms, others)
    assert none == {"cov2": 0.0, "cov5": 0.0, "rare_hit": 0.0, "rare_idf": 0.0}
    assert spread(lexical_kb.lexical, q, [], [right]) == none


def test_one_scoring_serves_every_coverage_feature(lexical_kb) -> None:
    """The decision scores its passages once (abstain.scored); the coverage, the spread
    and the KB coverage read from that are what the separate functions compute."""
    from clawkb.retrieve.abstain import (
        best_confidence,
        kb_coverage,
        question_terms,
        retrieval_confidence,
        scored,
    )
    from clawkb.retrieve.abstain_model import spread

    texts = [NOTES[n] for n in ("uart.md", "can.md", "ddr.md", "boot.md", "zh.md")]
    for q in [*ANSWERABLE, *UNANSWERABLE, "CAN 总线终端电阻"]:
        terms = question_terms(lexical_kb.lexical, q)
        done = scored(terms, texts, q)
        a, b = best_confidence(done), retrieval_confidence(terms, texts, question=q)
        assert (a.value, a.best_passage, a.matched, a.missing) == (
            b.value, b.best_passage, b.matched, b.missing)  # fmt: skip
        lex = lexical_kb.lexical
        assert spread(lex, q, terms, texts, done) == spread(lex, q, terms, texts)
        glossed = (done.terms, done.forms)
        assert kb_coverage(lex, terms, q, glossed) == kb_coverage(lex, terms, q)


def test_whole_question_held_verbatim() -> None:
    from clawkb.retrieve.abstain_model import whole

    # spaces, case and punctuation aside
    assert whole("intimateyogaforcouples", ["x", "Intimate_Yoga_For_Couples 是什么"]) == 1.0
    assert whole("紫金山 山地车", ["紫金山山地车报价"]) == 1.0
    assert whole("Application Level Tracing", ["application-level tracing lib"]) == 1.0
    # too short to mean anything inside longer words, or simply not there
    assert whole("ogn", ["recognition"]) == 0.0
    assert whole("山地", ["山地车"]) == 0.0
    assert whole("intimate yoga", ["yoga for couples"]) == 0.0
    assert whole("紫金山山地车", []) == 0.0


def test_title_channel_evidence() -> None:
    """What the title channel says of the top hits: its best title cosine (or the cosine
    of the other-language title that leads), against the best passage's."""
    from types import SimpleNamespace

    from clawkb.retrieve.abstain_model import title_evidence

    def view(**channels: dict) -> SimpleNamespace:
        return SimpleNamespace(explanation={"channels": channels})

    none = title_evidence([view(dense={"raw": 0.88})], 0.88)
    assert none == {"tcos": 0.0, "tgap": 0.0, "tlead": 0.0}
    listed = title_evidence([view(dense={"raw": 0.86}), view(titles={"raw": 0.9})], 0.86)
    assert listed["tcos"] > 0 and listed["tgap"] == pytest.approx(0.4) and listed["tlead"] == 0
    led = title_evidence([view(titles={"lead": True, "lead_raw": 0.875})], 0.88)
    assert led["tlead"] == 1.0 and led["tcos"] > 0 and led["tgap"] == pytest.approx(-0.05)
