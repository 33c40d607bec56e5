"""Calibrate the `ask` abstain threshold on BEIR-layout sets.

For each dataset, the judged queries are shuffled (fixed seed) and split in
two halves. The corpus is indexed WITHOUT the relevant documents of the
second half, so those queries are unanswerable; first-half queries whose
relevant documents all survive are answerable. Each query gets the retrieval
confidence `ask` computes (clawkb.answer.abstain). We report, per set and
pooled, the threshold maximising balanced accuracy (mean of the answer rate
on answerable and the abstain rate on unanswerable queries), and the rates at
the shipped DEFAULT_MIN_CONFIDENCE; "macro" weighs every set equally (the
shipped threshold is chosen from it, so the largest set does not dominate).

    .venv/bin/python bench/calibrate_abstain.py [--queries 200] [DATASET_DIR ...]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from clawkb.answer.abstain import DEFAULT_MIN_CONFIDENCE, question_terms, retrieval_confidence
from clawkb.evaluate.beir import load_beir
from clawkb.kb import KnowledgeBase, TextRecord

DEFAULT_SETS = ["cmrc2018-dev", "cranfield", "agentset-msmarco"]
SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def confidences(folder: Path, n_queries: int, seed: int = 13) -> tuple[list[float], list[float]]:
    ds = load_beir(folder)
    queries = [q for q in ds.queries if any(g > 0 for g in q.qrels.values())]
    random.Random(seed).shuffle(queries)
    half = min(n_queries // 2, len(queries) // 2)
    answerable, unanswerable = queries[:half], queries[half : 2 * half]
    removed = {d for q in unanswerable for d, g in q.qrels.items() if g > 0}
    answerable = [q for q in answerable if not removed & {d for d, g in q.qrels.items() if g > 0}]
    with tempfile.TemporaryDirectory() as tmp, KnowledgeBase.open(tmp, create=True) as kb:
        kb.index_texts(
            TextRecord(path=d.id, text=d.text, title=d.title)
            for d in ds.docs
            if d.id not in removed
        )

        def conf(text: str) -> float:
            hits = kb.search(text, limit=3).hits
            terms = question_terms(kb.lexical, text)
            texts = (" ".join((h.title, *h.anchor.heading_path, h.text)) for h in hits)
            return retrieval_confidence(terms, texts).value

        return [conf(q.text) for q in answerable], [conf(q.text) for q in unanswerable]


def best_threshold(pos: list[float], neg: list[float]) -> tuple[float, float]:
    grid = np.round(np.arange(0.05, 1.0, 0.01), 2)
    p, n = np.asarray(pos), np.asarray(neg)
    bal = [((p >= t).mean() + (n < t).mean()) / 2 for t in grid]
    i = int(np.argmax(bal))
    return float(grid[i]), float(bal[i])


def rates(pos: list[float], neg: list[float], t: float) -> dict[str, float]:
    answered = float(np.mean(np.asarray(pos) >= t))
    abstained = float(np.mean(np.asarray(neg) < t))
    return {
        "answer_rate": round(answered, 3),
        "abstain_rate": round(abstained, 3),
        "balanced": round((answered + abstained) / 2, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("datasets", nargs="*")
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    folders = [Path(d) for d in args.datasets] or [SHARED / s for s in DEFAULT_SETS]
    report: dict[str, object] = {"default_threshold": DEFAULT_MIN_CONFIDENCE, "sets": {}}
    all_pos: list[float] = []
    all_neg: list[float] = []
    per_set: list[tuple[list[float], list[float]]] = []
    for folder in folders:
        if not folder.is_dir():
            print(f"skip {folder}: not found", file=sys.stderr)
            continue
        t0 = time.perf_counter()
        pos, neg = confidences(folder, args.queries)
        per_set.append((pos, neg))
        t, bal = best_threshold(pos, neg)
        all_pos += pos
        all_neg += neg
        report["sets"][folder.name] = {  # type: ignore[index]
            "answerable": len(pos),
            "unanswerable": len(neg),
            "best_threshold": t,
            "best_balanced": round(bal, 3),
            "at_default": rates(pos, neg, DEFAULT_MIN_CONFIDENCE),
            "seconds": round(time.perf_counter() - t0, 1),
        }
        print(folder.name, report["sets"][folder.name], file=sys.stderr)  # type: ignore[index]
    grid = np.round(np.arange(0.05, 1.0, 0.01), 2)
    macro = [float(np.mean([rates(p, n, t)["balanced"] for p, n in per_set])) for t in grid]
    i = int(np.argmax(macro))
    report["macro"] = {
        "best_threshold": float(grid[i]),
        "best_balanced": round(macro[i], 3),
        "at_default": round(
            float(np.mean([rates(p, n, DEFAULT_MIN_CONFIDENCE)["balanced"] for p, n in per_set])), 3
        ),
    }
    t, bal = best_threshold(all_pos, all_neg)
    report["pooled"] = {
        "best_threshold": t,
        "best_balanced": round(bal, 3),
        "at_default": rates(all_pos, all_neg, DEFAULT_MIN_CONFIDENCE),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
