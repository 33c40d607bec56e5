"""False-abstain / false-answer of `clawkb search`'s "no match" decision, held-out halves.

    OMP_NUM_THREADS=1 nice .venv/bin/python bench/notfound_rates.py \
        --kb cranfield=<embedded KB> --kb esp-idf-en=<embedded KB of some en/ pages> ...

Every KB must already hold e5-small vectors (bench/dense_build.py, or the cached
evaluation KBs); each is copied to a temporary folder first, so the original is
never written (the dense index cache lives in the KB folder).

The decision is the one `search` and `ask` share (clawkb.retrieve.notfound ->
clawkb.retrieve.abstain_model.decide), run exactly as `clawkb search` runs it
(default mode = hybrid with vectors, limit 3), on a copy of the KB from which the
unanswerable queries' documents were removed. Groups of queries per KB:

* ``answerable`` — a shared set's judged queries of its answerable half; for
  esp-idf-docs, the golden.tsv queries whose page stayed in the KB (``ident``,
  ``ident_zh``, ``zh2en`` on ``en/``; ``en2zh`` on ``zh_CN/``);
* ``left_out`` — queries whose relevant documents are not in the KB. Shared sets:
  the judged queries are cut in two halves by a hash of their text
  (:func:`unanswerable_side`); the documents relevant to up to ``--queries`` of the
  other half are removed, except those also relevant to an answerable-half query
  (such a query is then in neither group). esp-idf-docs: a quarter of the pages, by a
  hash of their path (:func:`left_out_page`), are removed from the KB, and the
  section headings (``zh2en``, ``en2zh`` queries) of those pages are the queries.
  Nothing is chosen by hand or by looking at the KB's answers;
* ``soup`` — generated nonsense: random Latin letter strings, random CJK
  characters, keyboard runs;
* ``offtopic`` — written off-topic questions (bench/abstain_questions.py);
  off-topic for engineering docs and aerodynamics, not always for a web corpus;
* ``other`` — the old row: the other same-language set's queries (cranfield <->
  agentset-msmarco, cmrc2018-dev <-> qbqtc-dev);
* ``probe`` — other generated strings, never rated: the top cosine they reach is
  the KB's own "nothing" level (reported in the reading).

Each query falls in the dev or the held-out half by a hash of its text
(tools/abstain_model.is_dev, as the model's fit did); rates are reported on the
held-out half (the dev half is printed beside it). Every row keeps its decision's
features in bench/.cache/notfound-rows.json (tools/notfound_fit.py refits the model
from them); ``--report-only`` rewrites the tables from that file.
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
ROWS = ROOT / "bench" / ".cache" / "notfound-rows.json"
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


def soup(n: int, seed: int = 23) -> list[str]:
    """Generated nonsense only (letter soup, CJK soup, keyboard runs), ``n`` before dedup."""
    off = set(OFF_TOPIC)
    return [q for q in nonsense(4 * n // 3 + 4, seed) if q not in off][:n]


def unanswerable_side(q: str) -> bool:
    """Which half of a shared set's judged queries is made unanswerable (a hash of the
    text, independent of the dev / held-out split, which uses the first byte)."""
    return hashlib.sha1(q.encode("utf-8")).digest()[1] % 2 == 0


def leave_out_split(data: Path, name: str, n: int) -> tuple[list[str], list[str], set[str]]:
    """A shared set's judged queries in two halves (:func:`unanswerable_side`): the
    answerable half, and up to ``n`` queries of the other half whose relevant documents
    are all taken out of the KB. A document relevant to an answerable-half query stays
    (an unanswerable-half query that keeps one is left out of both groups). Returns
    (answerable, unanswerable, document ids to remove)."""
    from clawkb.evaluate.beir import load_beir

    ds = load_beir(data / name)
    judged = [q for q in ds.queries if any(g > 0 for g in q.qrels.values())]
    keep = {d for q in judged if not unanswerable_side(q.text) for d, g in q.qrels.items() if g > 0}
    rng = random.Random(13)
    side = [q for q in judged if unanswerable_side(q.text)]
    neg = [q for q in rng.sample(side, min(n, len(side)))
           if all(d not in keep for d, g in q.qrels.items() if g > 0)]  # fmt: skip
    drop = {d for q in neg for d, g in q.qrels.items() if g > 0}
    pos = [q.text for q in judged if not unanswerable_side(q.text)]
    return rng.sample(pos, min(n, len(pos))), [q.text for q in neg], drop


def left_out_page(page: str) -> bool:
    """esp-idf-docs pages left out of the KB: a quarter, by a hash of the page path."""
    return hashlib.sha1(("leave:" + page).encode("utf-8")).digest()[0] % 4 == 0


def remove_docs(kb: object, match: object) -> int:
    """Take the documents whose path ``match(path)`` accepts out of ``kb`` (a copy)."""
    from clawkb.ingest.sync import sync_lexical

    paths = [r[0] for r in kb.repo.conn.execute("SELECT path FROM documents")]  # type: ignore[attr-defined]
    docs = [kb.repo.document(p) for p in paths if match(p)]  # type: ignore[attr-defined, operator]
    with kb.writer():  # type: ignore[attr-defined]
        with kb.repo.transaction():  # type: ignore[attr-defined]
            for d in docs:
                kb.repo.remove_document(d)  # type: ignore[attr-defined]
        sync_lexical(kb.repo, kb.lexical, kb.config.index_batch_chunks)  # type: ignore[attr-defined]
    return len(docs)


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
    shown = (res.hits or res.nearest)[:3]
    out = {
        "q": q,
        "abstained": bool(res.abstained or not res.hits),
        "p": None if d is None else round(float(d.value), 5),
        "threshold": None if d is None else d.threshold,
        "dense_ran": bool(d is not None and d.features.get("cos", 0) > 0),
        "rule": None if d is None else d.method,
        "features": {} if d is None else dict(d.features),
        "top": [f"{h.anchor.path.rsplit('/', 1)[-1]} | {h.text[:60]}" for h in shown],
    }
    if BEFORE and d is not None:  # the previous model and rule on the same features
        m = BEFORE["hybrid" if out["dense_ran"] else "lexical"]
        p = m.probability({f: value(d.features, f) for f in m.features})
        named = verbatim(q, (res.hits or res.nearest)[:VERBATIM_DEPTH])
        anchored = float(d.features.get("anchor", 0.0)) > 0  # the exact-anchor rule
        out["before"] = bool(p < m.threshold and not named and not anchored)
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


#: Groups of queries per KB; the unanswerable ones, with the label the tables use.
UNANSWERABLE = {
    "left_out": "relevant documents left out of the KB",
    "soup": "generated nonsense (letter / CJK soup, keyboard runs)",
    "offtopic": "written off-topic questions",
    "other": "other set's queries (old row)",
}


#: The probe group: the generated queries the KB's "nothing" level is measured with
#: (clawkb.embed.nothing; another seed than ``soup``), never rated, never fitted.


def probes(per_script: int = 12, seed: int = 101) -> list[str]:
    """Generated Latin and CJK strings (another seed than ``soup``, none of them rated):
    the top cosines they reach are the KB's own "nothing" level, reported per KB."""
    rated = set(soup(200))
    rng = random.Random(seed)
    latin = "abcdefghijklmnopqrstuvwxyz"
    lat = [" ".join("".join(rng.choices(latin, k=rng.randint(4, 8))) for _ in range(2))
           for _ in range(per_script)]  # fmt: skip
    cjk = ["".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(rng.randint(3, 6)))
           for _ in range(per_script)]  # fmt: skip
    return [q for q in lat + cjk if q not in rated]


def page_of(path: str) -> str:
    """An esp-idf-docs page path relative to its language tree."""
    for tree in ("/en/", "/zh_CN/"):
        if tree in path:
            return path.split(tree, 1)[1]
    return path


def measure(name: str, home: Path, data: Path, n: int) -> dict:
    from clawkb.kb import KnowledgeBase

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "kb"
        shutil.copytree(home, copy, ignore=shutil.ignore_patterns("*.lock"))
        with KnowledgeBase.open(copy) as kb:
            if name.startswith("esp-idf"):
                removed = remove_docs(kb, lambda p: left_out_page(page_of(p)))
                pos, left = engdocs_queries(name, data, kb, n)
                other: list[str] = []
            else:
                pos, left, drop = leave_out_split(data, name, n)
                removed = remove_docs(kb, lambda p: p in drop)
                other = beir_queries(data, name, n)[1]
            groups = {"answerable": pos, "left_out": left, "soup": soup(200),
                      "offtopic": list(OFF_TOPIC), "other": other,
                      "probe": probes()}  # fmt: skip
            decide(kb, "warm up the model and the index")
            t0, JUDGE_CPU[0] = time.process_time(), 0.0
            out = {g: [decide(kb, q) for q in qs] for g, qs in groups.items()}
            cpu, judged = time.process_time() - t0, JUDGE_CPU[0]
    nq = sum(map(len, groups.values()))
    report: dict = {
        "kb": name,
        "removed_docs": removed,
        "cpu_s_per_query": round(cpu / nq, 4),
        "decision_cpu_share": round(judged / cpu, 3) if cpu else 0.0,
    }
    for half, keep in (("held_out", False), ("dev", True)):
        part = {g: [r for r in rs if is_dev(r["q"]) == keep] for g, rs in out.items()}
        h = report[half] = {g: len(rs) for g, rs in part.items()}
        h["false_abstain"] = rate(part["answerable"], False)
        for g in UNANSWERABLE:
            h[f"false_answer_{g}"] = rate(part[g], True)
        if BEFORE:
            h["before"] = {"false_abstain": rate(part["answerable"], False, "before")}
            for g in UNANSWERABLE:
                h["before"][f"false_answer_{g}"] = rate(part[g], True, "before")
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
        f"Targets: answerable answered >= {TARGET:.0%} (false-abstain <= 5 %), unanswerable",
        '"no match" >= 95 % (false-answer <= 5 %).',
        "",
        "Unanswerable kinds: " + "; ".join(f"`{k}` = {v}" for k, v in UNANSWERABLE.items()) + ".",
        "Each cell: n, then the error rate (before → after when `--before` was given: the",
        "same searches, the previous model file and its rules). Held-out halves:",
        "",
        "| KB | docs left out | answerable: false-abstain | "
        + " | ".join(f"{k}: false-answer" for k in UNANSWERABLE)
        + " | CPU ms/query | decision's share |",
        "|---|---:|---:|" + "---:|" * len(UNANSWERABLE) + "---:|---:|",
    ]

    def cell(h: dict, group: str, key: str) -> str:
        b = h.get("before")
        if not h.get(group):
            return "–"
        v = f"{b[key]:.1%} → {h[key]:.1%}" if b else f"{h[key]:.1%}"
        return f"{h[group]}: {v}"

    def row(r: dict, half: str) -> str:
        h = r[half]
        cells = [cell(h, "answerable", "false_abstain")]
        cells += [cell(h, g, f"false_answer_{g}") for g in UNANSWERABLE]
        return f"| {r['kb']} | {r.get('removed_docs', '–')} | " + " | ".join(cells)

    for r in reports:
        lines.append(
            row(r, "held_out")
            + f" | {1000 * r['cpu_s_per_query']:.0f} | {r['decision_cpu_share']:.0%} |"
        )
    lines += ["", "Dev halves (the fit's own half):", ""]
    lines += [
        "| KB | docs left out | answerable: false-abstain | "
        + " | ".join(f"{k}: false-answer" for k in UNANSWERABLE)
        + " |",
        "|---|---:|---:|" + "---:|" * len(UNANSWERABLE),
    ]
    lines += [row(r, "dev") + " |" for r in reports]
    reading = RESULTS / "notfound-reading.md"
    if reading.is_file():
        lines += ["", reading.read_text("utf-8").rstrip()]
    return "\n".join(lines) + "\n"


def _slim(row: dict) -> dict:
    """A row as committed: the verdicts and the top hit, without the features."""
    out = {k: v for k, v in row.items() if k not in ("features", "threshold", "top")}
    # a passage may quote the path it was indexed from: as seen from the repository
    top = (row.get("top") or [""])[0].replace(str(ROOT.parent) + "/", "../")
    out["top"] = top[:60]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", action="append", default=[], metavar="NAME=DIR")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the JSON and the table from the recorded rows")  # fmt: skip
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
    reports: list[dict] = []
    _timed_judge()
    if not args.kb and not args.report_only:
        ap.error("give --kb NAME=DIR (or --report-only)")
    for spec in args.kb:
        name, _, home = spec.partition("=")
        t0 = time.perf_counter()
        reports.append(measure(name, Path(home), data, args.queries))
        print(name, f"{time.perf_counter() - t0:.0f}s", json.dumps(reports[-1]["held_out"]),
              file=sys.stderr, flush=True)  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "notfound-rates.json"
    if ROWS.is_file():  # runs on other KBs stay: one table for every KB measured
        mine = {r["kb"] for r in reports}
        reports = [r for r in json.loads(ROWS.read_text()) if r["kb"] not in mine] + reports
    # every row with its features (tools/notfound_fit.py refits from them), not committed
    ROWS.parent.mkdir(parents=True, exist_ok=True)
    ROWS.write_text(json.dumps(reports, ensure_ascii=False))
    slim = [{**r, "rows": {g: [_slim(row) for row in rs] for g, rs in r["rows"].items()}}
            for r in reports]  # fmt: skip
    out.write_text(json.dumps(slim, indent=0, ensure_ascii=False))
    md = markdown(reports)
    (RESULTS / "notfound-rates.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
