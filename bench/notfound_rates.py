"""False-abstain / false-answer of `clawkb search`'s "no match" decision, held-out halves.

    OMP_NUM_THREADS=1 nice .venv/bin/python bench/notfound_rates.py \
        --kb cranfield=<embedded KB> --kb esp-idf-en=<embedded KB of some en/ pages> ...

Every KB must already hold e5-small vectors (bench/dense_build.py, or the cached
evaluation KBs); each is copied to a temporary folder first, so the original is
never written (the dense index cache lives in the KB folder).

The decision is the one `search` and `ask` share (clawkb.retrieve.notfound ->
clawkb.retrieve.abstain_model.decide), run exactly as `clawkb search` runs it
(default mode = hybrid with vectors, limit 3). Per KB:

* answerable — a shared set's own judged queries; for an esp-idf-docs KB built
  from a subset of the pages, the golden.tsv queries whose page is in the KB;
* unanswerable, "other set" — the other same-language set's queries (cranfield <->
  agentset-msmarco, cmrc2018-dev <-> qbqtc-dev); for esp-idf-docs, the section
  headings (zh2en, en2zh queries) of pages left out of the KB;
* unanswerable, "nonsense" — generated: random Latin letter strings, random CJK
  characters, keyboard runs and written off-topic questions (bench/abstain_questions.py).

Each query falls in the dev or the held-out half by a hash of its text
(tools/abstain_model.is_dev, as the model's fit did); rates are reported on the
held-out half (the dev half is printed beside it). P(answerable) is recorded for
every query, so the table also gives the rates at other thresholds.
Writes bench/results/notfound-rates.json and .md.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from abstain_questions import OFF_TOPIC, OTHER
from shared_data import add_datasets_flag, datasets_dir

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
TARGET = 0.95


def is_dev(q: str) -> bool:
    return hashlib.sha1(q.encode("utf-8")).digest()[0] % 2 == 0


def nonsense(n: int, seed: int = 19) -> list[str]:
    """Queries about nothing: letter soup, CJK soup, keyboard runs, off-topic questions."""
    rng = random.Random(seed)
    latin = "abcdefghijklmnopqrstuvwxyz"
    out = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            out.append(" ".join("".join(rng.choices(latin, k=rng.randint(4, 8))) for _ in range(2)))
        elif kind == 1:
            out.append("".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(rng.randint(3, 6))))
        elif kind == 2:
            row = rng.choice(["qwertyuiop", "asdfghjkl", "zxcvbnm"])
            start = rng.randint(0, 3)
            out.append(row[start : start + rng.randint(4, 6)] * rng.randint(1, 2))
        else:
            out.append(OFF_TOPIC[(i // 4) % len(OFF_TOPIC)])
    return list(dict.fromkeys(out))


def beir_queries(data: Path, name: str, n: int) -> tuple[list[str], list[str]]:
    from clawkb.evaluate.beir import load_beir

    rng = random.Random(13)
    own = [q.text for q in load_beir(data / name).queries if any(g > 0 for g in q.qrels.values())]
    other = [q.text for q in load_beir(data / OTHER[name]).queries]
    return rng.sample(own, min(n, len(own))), rng.sample(other, min(n, len(other)))


def engdocs_queries(name: str, data: Path, kb: object, n: int) -> tuple[list[str], list[str]]:
    """Golden queries of pages in the KB; headings of the pages left out."""
    rows = list(kb.repo.chunks_by_ids(kb.repo.all_chunk_ids()).values())  # type: ignore[attr-defined]
    paths = {r.path.replace("\\", "/") for r in rows}

    def held(expect: str) -> bool:
        return any(p.endswith("/" + expect) for p in paths)

    with open(data / "esp-idf-docs" / "golden.tsv", encoding="utf-8") as fh:
        golden = list(csv.DictReader(fh, delimiter="\t"))
    # the queries meant for this KB's language tree (a name ending in -zh: zh_CN/)
    lang_ok = {"en2zh"} if name.endswith("-zh") else {"zh2en", "ident", "ident_zh"}
    pos = [g["query"] for g in golden if g["kind"] in lang_ok and held(g["expect"])]
    neg = [g["query"] for g in golden if g["kind"] in ("zh2en", "en2zh") and not held(g["expect"])]
    rng = random.Random(13)
    return rng.sample(pos, min(n, len(pos))), rng.sample(neg, min(n, len(neg)))


BEFORE: dict = {}  # the models of --before (kind -> Model), for the same-run comparison


def decide(kb: object, q: str) -> dict:
    from clawkb.retrieve.abstain_model import value
    from clawkb.retrieve.notfound import VERBATIM_DEPTH, verbatim

    res = kb.search(q, limit=3)  # type: ignore[attr-defined]
    d = res.decision
    out = {
        "q": q,
        "abstained": bool(res.abstained or not res.hits),
        "p": None if d is None else round(float(d.value), 5),
        "threshold": None if d is None else d.threshold,
        "dense_ran": bool(d is not None and d.features.get("cos", 0) > 0),
    }
    if BEFORE and d is not None:  # the previous model and rule on the same features
        m = BEFORE["hybrid" if out["dense_ran"] else "lexical"]
        p = m.probability({f: value(d.features, f) for f in m.features})
        named = verbatim(q, (res.hits or res.nearest)[:VERBATIM_DEPTH])
        out["before"] = bool(p < m.threshold and not named)
    elif BEFORE:
        out["before"] = out["abstained"]
    return out


def rate(rows: list[dict], want_abstain: bool, key: str = "abstained") -> float:
    return sum(r[key] != want_abstain for r in rows) / len(rows) if rows else float("nan")


JUDGE_CPU = [0.0]


def _timed_judge() -> None:
    """Count the CPU time the decision itself takes inside each search."""
    from clawkb.retrieve import notfound

    inner = notfound.judge

    def judge(*a: object, **kw: object) -> object:
        t = time.process_time()
        try:
            return inner(*a, **kw)  # type: ignore[arg-type]
        finally:
            JUDGE_CPU[0] += time.process_time() - t

    notfound.judge = judge  # type: ignore[assignment]


def measure(name: str, home: Path, data: Path, n: int) -> dict:
    from clawkb.kb import KnowledgeBase

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "kb"
        shutil.copytree(home, copy, ignore=shutil.ignore_patterns("*.lock"))
        with KnowledgeBase.open(copy) as kb:
            if name.startswith("esp-idf"):
                pos, other = engdocs_queries(name, data, kb, n)
            else:
                pos, other = beir_queries(data, name, n)
            groups = {"answerable": pos, "other": other, "nonsense": nonsense(80)}
            decide(kb, "warm up the model and the index")
            t0, JUDGE_CPU[0] = time.process_time(), 0.0
            out = {g: [decide(kb, q) for q in qs] for g, qs in groups.items()}
            cpu, judged = time.process_time() - t0, JUDGE_CPU[0]
    nq = sum(map(len, groups.values()))
    report: dict = {
        "kb": name,
        "cpu_s_per_query": round(cpu / nq, 4),
        "decision_cpu_share": round(judged / cpu, 3) if cpu else 0.0,
    }
    for half, keep in (("held_out", False), ("dev", True)):
        part = {g: [r for r in rs if is_dev(r["q"]) == keep] for g, rs in out.items()}
        report[half] = {
            "answerable": len(part["answerable"]),
            "other": len(part["other"]),
            "nonsense": len(part["nonsense"]),
            "false_abstain": rate(part["answerable"], False),
            "false_answer_other": rate(part["other"], True),
            "false_answer_nonsense": rate(part["nonsense"], True),
        }
        if BEFORE:
            report[half]["before"] = {
                "false_abstain": rate(part["answerable"], False, "before"),
                "false_answer_other": rate(part["other"], True, "before"),
                "false_answer_nonsense": rate(part["nonsense"], True, "before"),
            }
    report["rows"] = out
    return report


def markdown(reports: list[dict]) -> str:
    lines = [
        '# `clawkb search` "no match": held-out error rates',
        "",
        "`OMP_NUM_THREADS=1 .venv/bin/python bench/notfound_rates.py --kb NAME=DIR ...`"
        " (method in the script's docstring). The decision is the fitted abstain model",
        "`ask` uses (src/clawkb/retrieve/abstain_model.json, threshold of the hybrid model;",
        "the lexical model when the lexical channel was decisive and the dense one skipped).",
        f"Targets: answerable answered >= {TARGET:.0%} (false-abstain <= 5 %), nonsense",
        '"no match" >= 95 % (false-answer <= 5 %).',
        "",
        "Each rate cell: before → after, measured in the same run on the same searches",
        "(before: the previous model file given with `--before` and the identifier rule it",
        "shipped with; after: the shipped model and rules). Held-out halves:",
        "",
        "| KB | answerable | false-abstain | other-set / left-out pages | false-answer |"
        " nonsense | false-answer | CPU ms/query | decision's share |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def cell(h: dict, key: str) -> str:
        b = h.get("before")
        return f"{b[key]:.1%} → {h[key]:.1%}" if b else f"{h[key]:.1%}"

    for r in reports:
        h = r["held_out"]
        lines.append(
            f"| {r['kb']} | {h['answerable']} | {cell(h, 'false_abstain')} | {h['other']}"
            f" | {cell(h, 'false_answer_other')} | {h['nonsense']}"
            f" | {cell(h, 'false_answer_nonsense')}"
            f" | {1000 * r['cpu_s_per_query']:.0f} | {r['decision_cpu_share']:.0%} |"
        )
    lines += ["", "Dev halves (the fit's own half; before → after):", ""]
    lines += [
        "| KB | false-abstain | false-answer other | false-answer nonsense |",
        "|---|---:|---:|---:|",
    ]
    for r in reports:
        d = r["dev"]
        lines.append(
            f"| {r['kb']} | {cell(d, 'false_abstain')} | {cell(d, 'false_answer_other')}"
            f" | {cell(d, 'false_answer_nonsense')} |"
        )
    reading = RESULTS / "notfound-reading.md"
    if reading.is_file():
        lines += ["", reading.read_text("utf-8").rstrip()]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", action="append", default=[], metavar="NAME=DIR", required=True)
    ap.add_argument("--queries", type=int, default=300, help="per group, before the split")
    ap.add_argument(
        "--before",
        metavar="JSON",
        help="an earlier abstain model file: its decisions on the same searches are reported"
        " beside the shipped model's (before / after, same run)",
    )
    add_datasets_flag(ap)
    args = ap.parse_args()
    data = datasets_dir(args.datasets)
    if args.before:
        from clawkb.retrieve.abstain_model import load_model

        BEFORE.update(load_model(str(Path(args.before).resolve())))
    reports = []
    _timed_judge()
    for spec in args.kb:
        name, _, home = spec.partition("=")
        t0 = time.perf_counter()
        reports.append(measure(name, Path(home), data, args.queries))
        print(name, f"{time.perf_counter() - t0:.0f}s", json.dumps(reports[-1]["held_out"]),
              file=sys.stderr, flush=True)  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "notfound-rates.json"
    if out.is_file():  # runs on other KBs stay: one table for every KB measured
        mine = {r["kb"] for r in reports}
        reports = [r for r in json.loads(out.read_text()) if r["kb"] not in mine] + reports
    out.write_text(json.dumps(reports, indent=1, ensure_ascii=False))
    md = markdown(reports)
    (RESULTS / "notfound-rates.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
