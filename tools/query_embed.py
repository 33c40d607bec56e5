"""One short query's embedding: the shipped path against this tree's, same process.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python tools/query_embed.py \
        [--datasets DIR] [--rounds 3] [--per-set 60] [--check 1000] [--variants fp32,threads2]

What a dense search pays per query (issues 19 and 24): ``E5Small.embed_queries([q])``.
Variants, interleaved round by round on the same queries (esp-idf-docs golden queries of
every kind, plus ``--per-set`` queries of each shared BEIR set):

* ``old``: the path as shipped before this change, rebuilt here from the same pieces
  (whole-text Viterbi on the piece table, then the windowed batch code), so both run
  on one session in one process;
* ``new``: ``embed_queries([q])`` of this tree, the word cache emptied at the start of
  every round (each round pays its misses: a fresh process);
* ``new-warm``: the same with the word cache of a process that has already embedded
  the other queries of the sets (all but the timed ones): a server or an agent session;
* optional ``fp32`` (the float graph of the same weights), ``threads2`` (two
  intra-op threads) and ``threads2nospin`` (two intra-op threads that sleep when idle
  instead of spinning): for the record, not shipped.

Reported: process CPU p50 / p95 and wall p50 in ms per query, new/old ratios, the
split of the new path (tokenize / inputs / ``session.run``), and the cosine of every
variant's vectors to the old path's over up to ``--check`` queries of each set
(all esp-idf golden queries). Writes ``bench/results/query-embed.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")
import bench_path  # noqa: F401  (bench/ on sys.path)
from shared_data import (
    RESULTS,
    SHARED_SETS,
    add_datasets_flag,
    datasets_dir,
    environment,
)


def load_queries(data: Path, per_set: int) -> dict[str, list[str]]:
    """Queries by set: every esp-idf golden query, the first ``per_set`` of each BEIR set."""
    out: dict[str, list[str]] = {}
    golden = data / "esp-idf-docs" / "golden.tsv"
    if golden.is_file():
        with open(golden, encoding="utf-8", newline="") as f:
            out["esp-idf-docs"] = [
                r["query"] for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            ]
    for name in SHARED_SETS:
        path = data / name / "queries.jsonl"
        if path.is_file():
            with open(path, encoding="utf-8") as f:
                out[name] = [
                    json.loads(line)["text"] for _, line in zip(range(per_set), f, strict=False)
                ]
    return out


def stats(cpu: list[float], wall: list[float]) -> dict[str, float]:
    return {
        "cpu_p50_ms": round(median(cpu), 3),
        "cpu_p95_ms": round(float(np.percentile(cpu, 95)), 3),
        "wall_p50_ms": round(median(wall), 3),
    }


def calm_session(e5: Any) -> Any:
    """``e5``'s session opened as shipped but with intra-op spinning off."""
    import onnxruntime as ort

    from clawkb.embed import e5_onnx

    class Calm(ort.SessionOptions):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.add_session_config_entry("session.intra_op.allow_spinning", "0")

    real = ort.SessionOptions
    ort.SessionOptions = Calm
    try:
        return e5_onnx.open_session(e5.img, e5.threads, e5.precision)
    finally:
        ort.SessionOptions = real


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_datasets_flag(ap)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--per-set", type=int, default=60, help="timed queries per BEIR set")
    ap.add_argument("--check", type=int, default=1000, help="cosine-checked queries per BEIR set")
    ap.add_argument("--variants", default="", help="extra variants: fp32,threads2,threads2nospin")
    ap.add_argument("--out", default="query-embed.json")
    args = ap.parse_args()

    from clawkb.embed.base import l2_normalize
    from clawkb.embed.e5 import E5Small
    from clawkb.embed.e5_pieces import META

    data = datasets_dir(args.datasets)
    check = load_queries(data, args.check)
    timed_sets = load_queries(data, args.per_set)
    qs = [q for name, v in timed_sets.items() for q in (v[::5] if name == "esp-idf-docs" else v)]
    e5 = E5Small(workers=1)
    qtok = e5.query_tok

    class Whole:
        """The tokenizer as shipped before: one Viterbi over the whole text."""

        def encode_batch(self, texts: list[str]) -> list[list[int]]:
            return [qtok._segment(qtok.normalize(t))[0] for t in texts]

    whole = Whole()
    variants: dict[str, Callable[[str], np.ndarray]] = {
        "old": lambda q: e5._embed(["query: " + q], whole)[0],
        "new": lambda q: e5.embed_queries([q])[0],
        "new-warm": lambda q: e5.embed_queries([q])[0],
    }
    # new-warm: the word cache of a process that has already served other queries of
    # the same sets (disjoint from the timed ones)
    timed = set(qs)
    earlier = [q for v in check.values() for q in v if q not in timed]
    extra = [v for v in args.variants.split(",") if v]
    if "fp32" in extra:
        f32 = E5Small(precision="fp32", workers=1)
        variants["fp32"] = lambda q: f32.embed_queries([q])[0]
    if "threads2" in extra:
        two = E5Small(threads=2, workers=1)
        variants["threads2"] = lambda q: two.embed_queries([q])[0]
    if "threads2nospin" in extra:  # two intra-op threads that sleep instead of spinning
        calm = E5Small(threads=2, workers=1)
        calm._session = calm_session(calm)
        variants["threads2nospin"] = lambda q: calm.embed_queries([q])[0]
    for f in variants.values():  # sessions, tables and graphs loaded outside the timing
        f("warm up")

    # agreement with the old path, every checked query
    agree: dict[str, dict[str, object]] = {}
    olds = {s: np.stack([variants["old"](q) for q in qlist]) for s, qlist in check.items()}
    for name in variants:
        if name in ("old", "new-warm"):
            continue
        per: dict[str, object] = {}
        for set_name, qlist in check.items():
            qtok.forget_words()
            a = olds[set_name]
            b = np.stack([variants[name](q) for q in qlist])
            cos = (l2_normalize(a) * l2_normalize(b)).sum(1)
            per[set_name] = {
                "queries": len(qlist),
                "cos_min": round(float(cos.min()), 6),
                "cos_mean": round(float(cos.mean()), 6),
                "below_0.9999": int((cos < 0.9999).sum()),
                "bit_identical": int((a == b).all(1).sum()),
            }
        agree[name] = per

    cpu: dict[str, list[float]] = {n: [] for n in variants}
    wall: dict[str, list[float]] = {n: [] for n in variants}
    for _ in range(args.rounds):  # variants interleaved, so load changes hit all alike
        for name, f in variants.items():
            qtok.forget_words()
            if name == "new-warm":
                qtok.encode_batch(["query: " + q for q in earlier])
            for q in qs:
                t, c = time.perf_counter(), time.process_time()
                f(q)
                wall[name].append((time.perf_counter() - t) * 1000)
                cpu[name].append((time.process_time() - c) * 1000)

    # where the new path's time goes (same queries, one more round, warm word cache)
    qtok.forget_words()
    qtok.encode_batch(["query: " + q for q in earlier])
    words = [w for q in qs for w in qtok.normalize("query: " + q).split(META)[1:]]
    hit_rate = sum(META + w in qtok._words for w in words) / max(1, len(words))
    img = e5.img
    split: dict[str, list[float]] = {"tokenize": [], "inputs": [], "session_run": []}
    for q in qs:
        c0 = time.process_time()
        (ids,) = qtok.encode_batch(["query: " + q])
        c1 = time.process_time()
        T = len(ids) + 2
        x = img.word_rows(np.array([[img.bos, *ids, img.eos]], np.int64))
        x += e5._pos[:T][None, :, :]
        x += e5._type
        mask = np.ones((1, T), np.float32)
        c2 = time.process_time()
        e5.session.run(["pooled"], {"x": x, "mask": mask})
        c3 = time.process_time()
        split["tokenize"].append((c1 - c0) * 1000)
        split["inputs"].append((c2 - c1) * 1000)
        split["session_run"].append((c3 - c2) * 1000)

    res = {n: stats(cpu[n], wall[n]) for n in variants}
    doc: dict[str, object] = {
        "environment": environment(),
        "timed_queries": len(qs),
        "rounds": args.rounds,
        "tokens_p50": median(len(qtok.encode("query: " + q)) for q in qs),
        "results": res,
        "cpu_p50_new_vs_old": round(res["new"]["cpu_p50_ms"] / res["old"]["cpu_p50_ms"], 3),
        "new_path_split_cpu_p50_ms": {k: round(median(v), 3) for k, v in split.items()},
        "warm_cache": {"earlier_queries": len(earlier), "word_hit_rate": round(hit_rate, 3)},
        "agreement_with_old": agree,
    }
    for n in extra:
        doc[f"cpu_p50_{n}_vs_old"] = round(res[n]["cpu_p50_ms"] / res["old"]["cpu_p50_ms"], 3)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / args.out).write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({k: v for k, v in doc.items() if k != "environment"}, indent=2))


if __name__ == "__main__":
    main()
