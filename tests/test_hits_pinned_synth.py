"""Search output on a small synthetic bilingual corpus is pinned, glossary balance included.

``tests/test_hits_pinned.py`` pins the examples; this test covers what they
barely exercise and what the per-query work between the lexical top-k and the
hits touches: mixed Chinese/English queries whose glossary translations are
rescaled by :func:`clawkb.retrieve.crossling.balance` (their weights are
pinned), the result's confidence, every field of the JSON hit and the deep
ranking ``clawkb eval`` asks for. The corpus is ``bench/synth.py``'s (seed 13),
which is deterministic for its ``GENERATOR_VERSION``. Regenerate after a
deliberate change with ``python tests/test_hits_pinned_synth.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from clawkb.kb import KnowledgeBase, TextRecord
from clawkb.retrieve.hits import hit_dict

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import synth  # noqa: E402

PINNED = ROOT / "tests" / "data" / "hits-pinned-synth.json"
N_DOCS, N_QUERIES = 1500, 80
TOP, DEEP = 10, 50


def _round(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 5)
    if isinstance(v, dict):
        return {k: _round(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_round(x) for x in v]
    return v


def _collect(kb_dir: Path) -> dict[str, Any]:
    texts, queries = synth.generate(N_DOCS, n_queries=N_QUERIES, seed=13)
    assert synth.GENERATOR_VERSION == 4, "the synthetic corpus changed: regenerate the pin"
    out: dict[str, Any] = {}
    with KnowledgeBase.open(kb_dir, create=True) as kb:
        kb.index_texts(TextRecord(path=f"d{i}", text=x) for i, x in enumerate(texts))
        for q in dict.fromkeys(x.text for x in queries):
            for _ in range(2):  # the second run meets every cache warm: same output
                res = kb.search(q, limit=TOP)
                deep = kb.search(q, limit=DEEP, snippets=False)
                got = {
                    "tokens": res.query_tokens,
                    "rewrites": _round(res.rewrites),
                    "confidence": round(res.confidence, 5),
                    "matched": res.matched,
                    "hits": [_round(hit_dict(h, text=False)) for h in res.hits],
                    "deep": [[h.anchor.id, round(h.score, 5)] for h in deep.hits],
                    "deep_top_terms": list(deep.hits[0].matched_terms) if deep.hits else [],
                }
                if q in out:
                    assert got == out[q], f"{q!r}: a repeated search gave another result"
                out[q] = got
    return out


def test_synthetic_search_output_matches_pinned(tmp_path: Path) -> None:
    if not PINNED.exists():
        pytest.fail(f"{PINNED} is missing: run python {Path(__file__).name} to create it")
    want = json.loads(PINNED.read_text("utf-8"))
    got = _collect(tmp_path / "kb")
    assert sorted(got) == sorted(want)
    # queries with glossary translations are among them, or the balance goes untested
    assert sum(1 for w in want.values() if w["rewrites"]) >= 5
    for q, w in want.items():
        g = got[q]
        for key in ("tokens", "rewrites", "confidence", "matched", "deep", "deep_top_terms"):
            assert g[key] == w[key], (q, key)
        assert len(g["hits"]) == len(w["hits"]), q
        for gh, wh in zip(g["hits"], w["hits"], strict=True):
            assert gh == wh, q


if __name__ == "__main__":  # regenerate the pinned output
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        data = _collect(Path(tmp) / "kb")
    lines = [json.dumps(q, ensure_ascii=False) + ": " + json.dumps(v, ensure_ascii=False)
             for q, v in data.items()]  # fmt: skip
    PINNED.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
    print(f"wrote {PINNED} ({len(data)} queries)", file=sys.stderr)
