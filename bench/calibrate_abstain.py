"""Calibrate `ask`'s abstain threshold on several kinds of corpus and report error rates.

    .venv/bin/python bench/calibrate_abstain.py [--queries 200] [--data DIR]

For each of the four shared sets and the bundled examples, a throw-away KB
holds the whole corpus. Answerable questions: the set's own judged queries
(for the examples, examples/questions.yaml). Unanswerable questions: judged
queries of another set in the same language (cranfield <-> agentset-msmarco,
cmrc2018-dev <-> qbqtc-dev) and, for the examples, written off-topic
questions plus other sets' queries. Each question gets the confidence `ask`
computes (clawkb.answer.abstain) from the top passages `kb.search` returns.
Reported per set at the shipped threshold: false-abstain (answerable but
abstained) and false-answer (unanswerable but answered); and the threshold
range that keeps false-abstain <= 5 % on every set. Writes
bench/results/abstain-latest.md and abstain.json.
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

from clawkb.answer.abstain import DEFAULT_MIN_CONFIDENCE, question_terms, retrieval_confidence
from clawkb.evaluate.beir import load_beir
from clawkb.evaluate.runner import _records
from clawkb.kb import KnowledgeBase

ROOT = Path(__file__).resolve().parents[1]
OTHER = {
    "cranfield": "agentset-msmarco",
    "agentset-msmarco": "cranfield",
    "cmrc2018-dev": "qbqtc-dev",
    "qbqtc-dev": "cmrc2018-dev",
}
#: Off-topic questions for the examples KB (embedded-engineering notes).
OFF_TOPIC = [
    "What is the capital of France?",
    "How do I configure a Kubernetes ingress controller?",
    "Who won the 2018 FIFA World Cup?",
    "What is the recommended dose of ibuprofen for adults?",
    "How long should I bake a sourdough loaf?",
    "Which sandbox backends are supported on macOS?",
    "How do I reset my Gmail password?",
    "What is the boiling point of ethanol?",
    "How do I train a Transformer language model on TPUs?",
    "What interest rate does a 30-year mortgage have today?",
    "Which PostgreSQL index type suits full-text search?",
    "How many moons does Jupiter have?",
    "乙醇的沸点是多少度？",
    "北京到上海的高铁要多长时间？",
    "如何配置 Nginx 反向代理的负载均衡？",
    "红烧肉怎么做才好吃？",
    "个人所得税的起征点是多少？",
    "Kubernetes 的 Pod 调度策略有哪些？",
    "如何申请美国签证？",
    "iPhone 的电池健康度怎么查看？",
]


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
            cos = [
                float(h.explanation["channels"]["dense"]["raw"])
                for h in hits[:3]
                if h.explanation and "dense" in h.explanation.get("channels", {})
            ]
            return [retrieval_confidence(terms, texts, question=text).value, max(cos, default=0.0)]

        try:
            return [conf(q) for q in pos], [conf(q) for q in neg]
        finally:
            kb.close()


def rates(pos: list[float], neg: list[float], t: float) -> dict[str, float]:
    return {
        "false_abstain": round(float(np.mean(np.asarray(pos) < t)), 4),
        "false_answer": round(float(np.mean(np.asarray(neg) >= t)), 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("CLAWKB_DATASETS") or str(ROOT.parent / "shared" / "datasets")
    ap.add_argument("--data", default=default, help="the shared datasets folder")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--threshold", type=float, default=DEFAULT_MIN_CONFIDENCE)
    args = ap.parse_args()
    data = Path(args.data)
    sets = {}
    for name in ("cranfield", "agentset-msmarco", "cmrc2018-dev", "qbqtc-dev", "examples"):
        if name != "examples" and not (data / name).is_dir():
            print(f"skip {name}: not found under {data}", file=sys.stderr)
            continue
        t0 = time.perf_counter()
        sets[name] = confidences(name, data, args.queries)
        print(
            name,
            f"{time.perf_counter() - t0:.0f}s",
            rates(*sets[name], args.threshold),
            file=sys.stderr,
        )
    grid = np.round(np.arange(0.30, 0.90, 0.01), 2)
    table = {float(t): {n: rates(p, q, float(t)) for n, (p, q) in sets.items()} for t in grid}
    ok = [t for t, r in table.items() if all(v["false_abstain"] <= 0.05 for v in r.values())]
    best = min(ok, key=lambda t: max(v["false_answer"] for v in table[t].values())) if ok else None
    report = {
        "threshold": args.threshold,
        "sets": {
            n: {"answerable": len(p), "unanswerable": len(q), **rates(p, q, args.threshold)}
            for n, (p, q) in sets.items()
        },
        "thresholds_meeting_false_abstain_5pct": [min(ok), max(ok)] if ok else None,
        "best_threshold_for_false_answer": best,
        "at_best": table.get(best) if best is not None else None,
    }
    out = ROOT / "bench" / "results"
    (out / "abstain.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [
        "# `ask` abstain calibration",
        "",
        "`.venv/bin/python bench/calibrate_abstain.py` (see its docstring for the method).",
        f"Threshold {args.threshold}; targets: false-abstain <= 5 %, false-answer <= 10 %.",
        "",
        "| set | answerable | unanswerable | false-abstain | false-answer |",
        "|---|---|---|---|---|",
        *[
            f"| {n} | {v['answerable']} | {v['unanswerable']} | {v['false_abstain']:.1%}"
            f" | {v['false_answer']:.1%} |"
            for n, v in report["sets"].items()
        ],
        "",
        f"Thresholds keeping false-abstain <= 5 % on every set: {report['thresholds_meeting_false_abstain_5pct']};"
        f" the one with the lowest worst false-answer: {best}.",
    ]
    (out / "abstain-latest.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
