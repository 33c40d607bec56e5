"""Calibrate `ask`'s abstain threshold on several kinds of corpus and report error rates.

    .venv/bin/python tools/calibrate_abstain.py [--queries 200] [--data DIR]

For each of the four shared sets and the bundled examples, a throw-away KB
holds the whole corpus. Answerable questions: the set's own judged queries
(for the examples, examples/questions.yaml). Unanswerable questions: judged
queries of another set in the same language (cranfield <-> agentset-msmarco,
cmrc2018-dev <-> qbqtc-dev) and, for the examples, written off-topic
questions plus other sets' queries. Each question gets the confidence `ask`
computes (clawkb.retrieve.abstain) from the top passages `kb.search` returns.
Reported per set at the shipped threshold: false-abstain (answerable but
abstained) and false-answer (unanswerable but answered); and the threshold
range that keeps false-abstain <= 5 % on every set. Writes
bench/results/abstain-threshold.md and abstain.json (the fitted model that replaced this rule: tools/abstain_model.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

import bench_path  # noqa: F401  (bench/ helpers below)
from abstain_questions import OFF_TOPIC, OTHER
from clawkb.evaluate.beir import load_beir
from clawkb.evaluate.runner import _records
from clawkb.kb import KnowledgeBase
from clawkb.retrieve.abstain import (
    DEFAULT_MIN_CONFIDENCE,
    DENSE_COS_HIGH,
    DENSE_COS_LOW,
    DENSE_MIN_CONFIDENCE,
    dense_confidence,
    dense_top,
    question_terms,
    retrieval_confidence,
)

ROOT = Path(__file__).resolve().parents[1]


def _questions(name: str, data: Path, n: int) -> tuple[list[str], list[str]]:
    if name == "examples":
        doc = yaml.safe_load((ROOT / "examples" / "questions.yaml").read_text("utf-8"))
        pos = [q["question"] for q in doc["questions"]]
        neg = OFF_TOPIC + doc.get("unanswerable", [])
        rng = random.Random(5)
        for other in ("cranfield", "cmrc2018-dev"):
            if (data / other).is_dir():
                qs = [q.text for q in load_beir(data / other).queries]
                neg += rng.sample(qs, 20)
        return pos, list(dict.fromkeys(neg))
    judged = [
        q.text for q in load_beir(data / name).queries if any(g > 0 for g in q.qrels.values())
    ]
    other = [q.text for q in load_beir(data / OTHER[name]).queries]
    rng = random.Random(13)
    return rng.sample(judged, min(n, len(judged))), rng.sample(other, min(n, len(other)))


def confidences(
    name: str, data: Path, n: int, dense: bool = False
) -> tuple[list[list[float]], list[list[float]]]:
    """Per question: [term coverage, top dense cosine or 0] (`dense`: KBs with vectors)."""
    pos, neg = _questions(name, data, n)
    cached = ROOT / "bench" / ".cache" / "dense" / name
    with tempfile.TemporaryDirectory() as tmp:
        home = cached if dense and name != "examples" else Path(tmp)
        kb = KnowledgeBase.open(home, create=True)
        if name == "examples":
            kb.index([ROOT / "examples" / "notes", ROOT / "examples" / "datasheets"])
        elif not dense:
            kb.index_texts(_records(load_beir(data / name)))
        if dense:
            from clawkb.embed.e5 import E5Small
            from clawkb.embed.run import embed_kb

            emb = E5Small()
            embed_kb(kb, embedder=emb)
            from clawkb.retrieve.pipeline import retriever_for

            retriever_for(kb).set_embedder(emb)

        def conf(text: str) -> list[float]:
            hits = kb.search(text, limit=8, explain=dense).hits
            terms = question_terms(kb.lexical, text)
            texts = [" ".join((h.title, *h.anchor.heading_path, h.text)) for h in hits]
            cos = dense_top(hits) if dense else None
            return [retrieval_confidence(terms, texts, question=text).value, cos or 0.0]

        try:
            return [conf(q) for q in pos], [conf(q) for q in neg]
        finally:
            kb.close()


def rates(pos: list[float], neg: list[float], t: float) -> dict[str, float]:
    return {
        "false_abstain": round(float(np.mean(np.asarray(pos) < t)), 4),
        "false_answer": round(float(np.mean(np.asarray(neg) >= t)), 4),
    }


def shipped(rows: list[list[float]], dense: bool) -> list[float]:
    """The confidence `ask` ships: coverage, or max(coverage, mapped cosine) with vectors."""
    return [max(c, dense_confidence(d)) if dense and d > 0 else c for c, d in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("CLAWKB_DATASETS") or str(ROOT.parent / "shared" / "datasets")
    ap.add_argument("--data", default=default, help="the shared datasets folder")
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    data = Path(args.data)
    report: dict[str, dict] = {}
    lines = [
        "# `ask` abstain calibration",
        "",
        "`CLAWKB_DATASETS=<shared>/datasets .venv/bin/python tools/calibrate_abstain.py`",
        "(method in the script's docstring). Targets: false-abstain <= 5 % on answerable,",
        "false-answer <= 10 % on unanswerable questions. `lexical`: a KB without vectors",
        f"(threshold {DEFAULT_MIN_CONFIDENCE}); `hybrid`: the same corpora with e5-small vectors",
        f"(bench/.cache/dense, threshold {DENSE_MIN_CONFIDENCE}, confidence = max(term coverage,",
        f"cosine mapped from [{DENSE_COS_LOW}, {DENSE_COS_HIGH}])).",
    ]
    for dense in (False, True):
        mode = "hybrid" if dense else "lexical"
        t = DENSE_MIN_CONFIDENCE if dense else DEFAULT_MIN_CONFIDENCE
        sets = {}
        for name in ("cranfield", "agentset-msmarco", "cmrc2018-dev", "qbqtc-dev", "examples"):
            if name != "examples" and not (data / name).is_dir():
                print(f"skip {name}: not found under {data}", file=sys.stderr)
                continue
            if (
                dense
                and name != "examples"
                and not (ROOT / "bench" / ".cache" / "dense" / name).is_dir()
            ):
                print(f"skip {name}: run bench/dense_build.py first", file=sys.stderr)
                continue
            t0 = time.perf_counter()
            pos, neg = confidences(name, data, args.queries, dense=dense)
            sets[name] = (shipped(pos, dense), shipped(neg, dense))
            print(
                mode,
                name,
                f"{time.perf_counter() - t0:.0f}s",
                rates(*sets[name], t),
                file=sys.stderr,
            )
        report[mode] = {
            "threshold": t,
            "sets": {
                n: {"answerable": len(p), "unanswerable": len(q), **rates(p, q, t)}
                for n, (p, q) in sets.items()
            },
            "sweep": {
                str(float(x)): {n: rates(p, q, float(x)) for n, (p, q) in sets.items()}
                for x in np.round(np.arange(0.40, 0.80, 0.02), 2)
            },
        }
        lines += [
            "",
            f"## {mode} (threshold {t})",
            "",
            "| set | answerable | unanswerable | false-abstain | false-answer |",
            "|---|---|---|---|---|",
            *[
                f"| {n} | {v['answerable']} | {v['unanswerable']} | {v['false_abstain']:.1%}"
                f" | {v['false_answer']:.1%} |"
                for n, v in report[mode]["sets"].items()
            ],
        ]
    out = ROOT / "bench" / "results"
    (out / "abstain.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "abstain-threshold.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
