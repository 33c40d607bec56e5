"""Smoke test for bench/: the synthetic corpus and the clawkb and bm25s adapters at 2k docs."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import synth  # noqa: E402

N_DOCS = 2000
N_QUERIES = 200


@pytest.fixture(scope="module")
def corpus() -> tuple[list[str], list[synth.Query]]:
    return synth.generate(N_DOCS, n_queries=N_QUERIES, seed=7)


def test_synth_is_deterministic_and_prefix_stable() -> None:
    a, qa = synth.generate(300, n_queries=20, seed=3)
    b, qb = synth.generate(300, n_queries=20, seed=3)
    longer, _ = synth.generate(400, n_queries=20, seed=3)
    assert a == b and qa == qb
    assert longer[:300] == a


def test_synth_shape(corpus: tuple[list[str], list[synth.Query]]) -> None:
    texts, queries = corpus
    assert len(texts) == N_DOCS and len(queries) == N_QUERIES
    assert all("\n" not in t for t in texts)
    mean_len = sum(map(len, texts)) / len(texts)
    assert 200 <= mean_len <= 450
    zh_docs = sum(1 for t in texts if sum(c >= "\u4e00" for c in t) > len(t) / 3)
    assert 0.2 < zh_docs / len(texts) < 0.5
    assert {q.lang for q in queries} == {"en", "zh", "mixed"}
    assert all(0 <= q.doc < N_DOCS and q.text.strip() for q in queries)


def _self_hit_rate(engine: object, queries: list[synth.Query]) -> float:
    hits = 0
    for q in queries:
        ids = engine.query(q.text, 10)  # type: ignore[attr-defined]
        assert len(ids) <= 10
        assert all(0 <= i < N_DOCS for i in ids)
        hits += q.doc in ids
    return hits / len(queries)


@pytest.fixture()
def adapter(request: pytest.FixtureRequest) -> Iterator[object]:
    import peers

    if request.param.startswith("clawkb"):
        pytest.importorskip("clawkb.kb", reason="clawkb.kb not available yet")
    else:
        pytest.importorskip(request.param)
    engine = peers.make(request.param)
    yield engine
    engine.close()


@pytest.mark.parametrize("adapter", ["clawkb", "clawkb-index", "bm25s"], indirect=True)
def test_adapter_finds_source_doc(
    adapter: object, corpus: tuple[list[str], list[synth.Query]]
) -> None:
    texts, queries = corpus
    adapter.build(texts)  # type: ignore[attr-defined]
    assert _self_hit_rate(adapter, queries) >= 0.5


def test_tree_sampler_counts_a_live_child_and_build_cpu_counts_a_waited_one() -> None:
    """The tree peak covers memory held by a child process while it runs, and the
    build CPU figure covers a child's CPU once it has been waited for."""
    import subprocess

    import lexical

    hold = "b = bytearray(80 << 20); import time; sum(range(3_000_000)); time.sleep(0.6)"
    cpu0 = lexical.build_cpu_s()
    with lexical.TreeSampler(interval=0.01) as tree:
        own_kb = lexical._vm_rss_kb("self")
        subprocess.run([sys.executable, "-c", hold], check=True)
    assert tree.peak_kb >= own_kb + 70 * 1024
    assert lexical.build_cpu_s() - cpu0 > 0.05
