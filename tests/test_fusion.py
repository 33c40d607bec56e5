"""Fusion, rewrite, cache and merge: pure functions checked against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from clawkb.errors import ConfigError
from clawkb.retrieve import fusion
from clawkb.retrieve.cache import TTLCache
from clawkb.retrieve.rewrite import load_synonyms, rewrite


def ch(ids, scores):
    return fusion.Channel(np.array(ids, np.int64), np.array(scores, np.float32))


def test_weighted_rrf_by_hand():
    out = fusion.rrf(
        {"lexical": ch([1, 2, 3], [9, 5, 1]), "dense": ch([3, 1], [0.9, 0.8])},
        {"lexical": 1.0, "dense": 2.0},
        k=10,
    )
    got = {f.chunk_id: f.score for f in out}
    assert got[1] == pytest.approx(1 / 11 + 2 / 12)
    assert got[3] == pytest.approx(1 / 13 + 2 / 11)
    assert got[2] == pytest.approx(1 / 12)
    assert [f.chunk_id for f in out] == [3, 1, 2]
    assert out[0].trace["dense"] == {
        "rank": 1,
        "raw": pytest.approx(0.9),
        "norm": pytest.approx(1 / 11, abs=1e-6),
        "contribution": pytest.approx(2 / 11, abs=1e-6),
    }


def test_linear_minmax_with_missing_channel_floor():
    out = fusion.linear(
        {"lexical": ch([1, 2, 3], [10, 6, 2]), "dense": ch([3, 4], [0.9, 0.5])},
        {"lexical": 0.5, "dense": 1.0},
        norm="minmax",
    )
    got = {f.chunk_id: f.score for f in out}
    assert got[1] == pytest.approx(0.5 * 1.0 + 1.0 * 0.0)
    assert got[3] == pytest.approx(0.5 * 0.0 + 1.0 * 1.0)
    assert got[2] == pytest.approx(0.5 * 0.5)
    assert got[4] == pytest.approx(0.0)
    assert out[0].chunk_id == 3 and out[0].trace["lexical"]["rank"] == 3


def test_linear_zscore_and_recency():
    scores = np.array([3.0, 1.0, 2.0])
    out = fusion.linear(
        {"lexical": ch([1, 2, 3], scores)},
        {"lexical": 1.0},
        norm="zscore",
        recency={1: 0.0, 2: 1.0, 3: 0.5},
        recency_weight=2.0,
    )
    z = (scores - scores.mean()) / scores.std()
    got = {f.chunk_id: f.score for f in out}
    assert got[1] == pytest.approx(z[0])
    assert got[2] == pytest.approx(z[1] + 2.0)
    assert [f.chunk_id for f in out] == [1, 3, 2]
    assert out[2].trace["recency"]["contribution"] == pytest.approx(2.0)


def test_recency_half_life_and_bad_values():
    day = 86400.0
    assert fusion.recency_score(100 * day, 100 * day, 30) == 1.0
    assert fusion.recency_score(70 * day, 100 * day, 30) == pytest.approx(0.5)
    assert fusion.recency_score(40 * day, 100 * day, 30) == pytest.approx(0.25)
    with pytest.raises(ConfigError, match="half-life"):
        fusion.recency_score(0, 1, 0)
    with pytest.raises(ConfigError, match="norm"):
        fusion.linear({"lexical": ch([1], [1])}, {}, norm="softmax")


def test_synonym_file_and_weighted_expansion(tmp_path):
    path = tmp_path / "synonyms.txt"
    path.write_text(
        "# hardware words\n阻抗 = impedance\nDDR = 内存颗粒, memory chip | 0.6\n", "utf-8"
    )
    groups = load_synonyms(path)
    rw = rewrite("DDR 阻抗", groups)
    added = dict(zip(rw.tokens, rw.weights, strict=True))
    assert added["impedance"] == 0.5 and added["memory"] == 0.6 and added["内存"] == 0.6
    assert added["ddr"] == 1.0
    assert {(e["from"], e["to"]) for e in rw.expansions} >= {
        ("阻抗", "impedance"),
        ("ddr", "内存颗粒"),
    }
    assert rewrite("ADDRESS map", groups).expansions == []  # DDR is not a word of ADDRESS
    assert rewrite("impedance", groups).expansions[0]["to"] == "阻抗"  # both directions


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("just words", r"synonyms.txt:1: expected 'term = alias"),
        ("a = b | x", "not a number"),
        ("a = ", "at least two terms"),
        ("a = b | 3", r"weight must be in \(0, 1\]"),
    ],
)
def test_bad_synonym_lines_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "synonyms.txt"
    path.write_text(line + "\n", "utf-8")
    with pytest.raises(ConfigError, match=message):
        load_synonyms(path)


def test_ttl_cache_expires_and_evicts():
    now = [0.0]
    c = TTLCache(size=2, ttl_s=10, clock=lambda: now[0])
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1
    c.put("c", 3)  # evicts b (least recently used)
    assert c.get("b") is None and c.get("c") == 3
    now[0] = 11
    assert c.get("a") is None and c.get("c") is None and len(c) == 0  # both expired


def test_vectorised_rrf_matches_the_loop_scores_order_and_traces():
    """The vectorised RRF gives the one-at-a-time loop's floats, order and traces
    (traces are built when read; plugins may still ``dataclasses.replace`` a Fused)."""
    import dataclasses

    rng = np.random.default_rng(5)
    for n1, n2 in [(0, 0), (1, 0), (7, 3), (120, 90), (300, 300)]:
        lex = ch(rng.choice(1000, n1, replace=False), rng.random(n1) * 30)
        dense = ch(rng.choice(1000, n2, replace=False), rng.random(n2))
        channels = {"lexical": lex, "dense": dense}
        weights = {"lexical": 0.37, "dense": 1.0}
        fast, slow = fusion.rrf(channels, weights, 20), fusion._rrf_loop(channels, weights, 20)
        assert [(f.chunk_id, f.score) for f in fast] == [(f.chunk_id, f.score) for f in slow]
        assert [f.trace for f in fast] == [f.trace for f in slow]
    f = fusion.rrf({"lexical": ch([4, 2], [2.0, 1.0])}, {"lexical": 1.0}, 20)[1]
    g = dataclasses.replace(f, score=9.0)
    assert (g.chunk_id, g.score, g.trace) == (2, 9.0, f.trace) and g.trace["lexical"]["rank"] == 2


def test_rrf_with_an_id_listed_twice_keeps_the_loop_semantics():
    out = fusion.rrf({"lexical": ch([1, 1, 2], [3, 2, 1])}, {"lexical": 1.0}, k=10)
    assert {f.chunk_id: f.score for f in out} == {1: 1 / 11 + 1 / 12, 2: 1 / 13}


def test_one_channel_traces_are_built_when_read_and_equal_the_eager_ones():
    ch = fusion.Channel(np.array([7, 3, 9], np.int64), np.array([2.5, 1.25, 0.3333333], np.float32))
    fused = fusion.single("lexical", ch)
    assert [f.chunk_id for f in fused] == [7, 3, 9]
    assert [f.score for f in fused] == ch.scores.tolist()
    assert all(f.__dict__["_trace"] is None for f in fused)  # nothing built yet
    want = [
        {"lexical": {"rank": i, "raw": round(v, 6)}} for i, v in enumerate(ch.scores.tolist(), 1)
    ]
    assert [f.trace for f in fused] == want
    fused[0].trace["extra"] = 1  # a built trace is kept: later reads see the change
    assert fused[0].trace["extra"] == 1


def test_the_exact_stage_builds_no_trace_nobody_reads():
    from clawkb.retrieve.exact import _Covered

    pool = fusion.single("lexical", fusion.Channel(np.array([1, 2]), np.array([3.0, 1.0])))
    table = _Covered(pool, {1: 0.0, 2: 1.0})
    lifted = fusion.lazy(2, 5.0, table, 1)
    assert pool[1].__dict__["_trace"] is None  # the stage itself read no trace
    assert lifted.trace == {"lexical": {"rank": 2, "raw": 1.0}, "exact": {"coverage": 1.0}}
    assert pool[0].__dict__["_trace"] is None  # reading one builds only that one's
