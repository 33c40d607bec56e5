"""Fit `ask`'s abstain model (clawkb.retrieve.abstain_model) and report held-out error rates.

    CLAWKB_DATASETS=<shared>/datasets OMP_NUM_THREADS=1 .venv/bin/python bench/abstain_model.py

1. Questions per corpus (the four shared sets and the bundled examples):
   answerable = the set's own judged queries (examples: questions.yaml and the
   two golden files); unanswerable = the other same-language set's queries,
   plus generated other-domain questions: written off-topic questions and the
   examples' questions (embedded engineering) on the shared sets; on the
   examples, off-topic questions and the shared sets' queries.
2. For every question, the signals `ask` computes (``features``), once on a
   KB without vectors in use (``mode=lexical``) and once with e5-small vectors
   (hybrid; the KBs of bench/dense_build.py). Cached in bench/.cache/abstain.
3. Cleaning: the other same-language set's queries are not all unanswerable
   (a qbqtc web query can be answered by a cmrc Wikipedia paragraph). Those
   a stronger judge says the corpus answers — dense cosine and term coverage
   both at least the 10th percentile of the corpus's own answerable dev questions
   (``likely_answered``) — are dropped from the cleaned unanswerable set.
4. Each question is put in the dev or the held-out half by a hash of its
   text. A logistic model per KB kind is fitted on the cleaned dev halves of all
   corpora pooled (each corpus × class weighted equally; L2), and its
   threshold minimises, on the cleaned dev halves, the worst excess over the targets
   (false-abstain - 5 %, false-answer - 10 %) over all corpora. Writes src/clawkb/retrieve/abstain_model.json, then reports
   false-abstain / false-answer per corpus on the held-out halves (false-answer
   on the cleaned and on the full unanswerable sets), beside the
   previous single-threshold rule on the same questions, and the trade-off
   curve (bench/results/abstain-model.json).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from calibrate_abstain import OFF_TOPIC, OTHER
from clawkb.evaluate.beir import load_beir
from clawkb.retrieve.abstain_model import AGREE_RANK, derived, value
from shared_data import add_datasets_flag, datasets_dir

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "bench" / ".cache"
OUT = ROOT / "src" / "clawkb" / "retrieve" / "abstain_model.json"
SETS = ("cranfield", "agentset-msmarco", "cmrc2018-dev", "qbqtc-dev", "examples")
#: Every signal also enters multiplied by the question's CJK share: Chinese bigram
#: coverage behaves unlike English word coverage (in effect one model per script).
_LEX = ["coverage", "matched", "lex_norm", "lang_diff", "cov2", "cov5", "rare_hit", "rare_idf"]
_HYB = [*_LEX, "dconf", "agree"]
FEATURES = {
    "lexical": ["cjk", *_LEX, *(f"cjk*{f}" for f in _LEX)],
    "hybrid": ["cjk", *_HYB, *(f"cjk*{f}" for f in _HYB)],
}
#: The feature sets before spread / rare-term features, compared by ``--cv``.
PREVIOUS = {
    "lexical": [*_LEX[:4], "cjk", "cjk*coverage", "cjk*gap", "cjk*lex_norm"],
    "hybrid": [*_LEX[:4], "cjk", "dconf", "agree", "cjk*coverage", "cjk*gap", "cjk*lex_norm",
               "cjk*dconf"],
}  # fmt: skip
#: The judge of ``likely_answered``: percentile of the answerable dev questions' signals.
JUDGE_PERCENTILE = 10
MAX_FALSE_ABSTAIN = 0.05
MAX_FALSE_ANSWER = 0.10


def _examples_questions() -> list[str]:
    doc = yaml.safe_load((ROOT / "examples" / "questions.yaml").read_text("utf-8"))
    out = [q["question"] for q in doc["questions"]]
    for name in ("golden.yaml", "hardware-golden.yaml"):
        g = yaml.safe_load((ROOT / "examples" / name).read_text("utf-8"))
        out += [q["query"] for q in g["queries"]]
    return list(dict.fromkeys(out))


def questions(name: str, data: Path, n: int) -> tuple[list[str], list[str]]:
    from clawkb.evaluate.beir import load_beir

    rng = random.Random(13)
    if name == "examples":
        doc = yaml.safe_load((ROOT / "examples" / "questions.yaml").read_text("utf-8"))
        neg = OFF_TOPIC + doc.get("unanswerable", [])
        for other in SETS[:-1]:
            qs = [q.text for q in load_beir(data / other).queries]
            neg += rng.sample(qs, 40)
        return _examples_questions(), list(dict.fromkeys(neg))
    judged = [
        q.text for q in load_beir(data / name).queries if any(g > 0 for g in q.qrels.values())
    ]
    other = [q.text for q in load_beir(data / OTHER[name]).queries]
    neg = rng.sample(other, min(n, len(other))) + OFF_TOPIC + _examples_questions()[:20]
    return rng.sample(judged, min(n, len(judged))), list(dict.fromkeys(neg))


def collect(name: str, data: Path, n: int) -> dict:
    """Per question and KB kind: the features and the previous rule's confidence."""
    path = CACHE / "abstain" / f"{name}-{n}-v2.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())
    from clawkb.embed.e5 import E5Small
    from clawkb.embed.run import embed_kb
    from clawkb.kb import KnowledgeBase
    from clawkb.retrieve.abstain import dense_confidence, dense_top, question_terms
    from clawkb.retrieve.abstain import retrieval_confidence as rc
    from clawkb.retrieve.abstain_model import features
    from clawkb.retrieve.pipeline import retriever_for

    pos, neg = questions(name, data, n)
    emb = E5Small()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) if name == "examples" else CACHE / "dense" / name
        kb = KnowledgeBase.open(home, create=name == "examples")
        if name == "examples":
            kb.index([ROOT / "examples" / "notes", ROOT / "examples" / "datasheets"])
            embed_kb(kb, embedder=emb)
        retriever_for(kb).set_embedder(emb)

        def row(q: str) -> dict:
            out = {}
            terms = question_terms(kb.lexical, q)
            for kind in ("lexical", "hybrid"):
                hits = kb.search(
                    q, limit=8, explain=True, mode=kind, budget_dense_ms=120_000.0
                ).hits
                texts = [" ".join((h.title, *h.anchor.heading_path, h.text)) for h in hits]
                conf = rc(terms, texts, question=q)
                cos = dense_top(hits) if kind == "hybrid" else None
                f = features(kb.lexical, q, hits, terms, conf.value, len(conf.matched), cos, texts)
                old = max(conf.value, dense_confidence(cos)) if cos is not None else conf.value
                ranks = [
                    {
                        c: ((h.explanation or {}).get("channels") or {}).get(c, {}).get("rank")
                        for c in ("lexical", "dense")
                    }
                    for h in hits[:3]
                ]
                out[kind] = {"features": f, "old": old, "ranks": ranks}
            return out

        try:
            rows = [{"q": q, "y": 1, **row(q)} for q in pos]
            rows += [{"q": q, "y": 0, **row(q)} for q in neg]
        finally:
            kb.close()
    res = {"name": name, "rows": rows}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(res))
    return res


def is_dev(q: str) -> bool:
    return hashlib.sha1(q.encode("utf-8")).digest()[0] % 2 == 0


def fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float = 1.0) -> tuple[np.ndarray, float]:
    """Weighted L2 logistic regression by Newton steps, on standardised features."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = np.hstack([np.ones((len(x), 1)), (x - mu) / sd])
    beta = np.zeros(z.shape[1])
    reg = np.full(z.shape[1], l2)
    reg[0] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-z @ beta))
        grad = z.T @ (w * (p - y)) + reg * beta
        hess = (z * (w * p * (1 - p))[:, None]).T @ z + np.diag(reg)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    coef = beta[1:] / sd
    return coef, float(beta[0] - (coef * mu).sum())


def rates(p: np.ndarray, y: np.ndarray, t: float) -> dict[str, float]:
    return {
        "false_abstain": round(float(np.mean(p[y == 1] < t)), 4) if (y == 1).any() else 0.0,
        "false_answer": round(float(np.mean(p[y == 0] >= t)), 4) if (y == 0).any() else 0.0,
    }


def row_features(row: dict, kind: str, agree_rank: int = AGREE_RANK) -> dict[str, float]:
    """The cached features, ``agree`` recomputed from the cached channel ranks."""
    f = dict(row[kind]["features"])
    ranks = row[kind].get("ranks")
    if ranks:
        both = [r for r in ranks if all((r.get(c) or 10**9) <= agree_rank for c in r)]
        f["agree"] = len(both) / len(ranks)
    return derived(f, row["q"])


def fit_model(
    kind: str, rows: dict[str, list[dict]], agree_rank: int, dev_only: bool = True
) -> tuple[np.ndarray, float]:
    """Coefficients on the dev rows (hybrid: only rows whose dense channel ran)."""
    xs, ys, ws = [], [], []
    for rs in rows.values():
        rs = [
            r
            for r in rs
            if (is_dev(r["q"]) or not dev_only)
            and (kind == "lexical" or r[kind]["features"]["cos"] > 0)
        ]
        x = np.array(
            [[value(row_features(r, kind, agree_rank), c) for c in FEATURES[kind]] for r in rs]
        )
        y = np.array([r["y"] for r in rs], float)
        for cls in (0, 1):
            m = y == cls
            if m.any():
                xs.append(x[m])
                ys.append(y[m])
                ws.append(np.full(m.sum(), 1.0 / m.sum()))
    return fit(np.vstack(xs), np.concatenate(ys), np.concatenate(ws) * 100)


def scores(kind: str, rs: list[dict], models: dict, agree_rank: int) -> np.ndarray:
    """P(answerable) per row; a hybrid row whose dense channel was skipped (lexical
    early return) is decided by the lexical model, as `ask` does: +-inf."""
    out = []
    for r in rs:
        use = kind if kind == "lexical" or r[kind]["features"]["cos"] > 0 else "lexical"
        coef, b, t = models[use]
        x = np.array([value(row_features(r, kind, agree_rank), c) for c in FEATURES[use]])
        p = float(1 / (1 + np.exp(-(x @ coef + b))))
        out.append(p if use == kind else (np.inf if p >= t else -np.inf))
    return np.array(out)


def excess(split: dict[str, tuple[np.ndarray, np.ndarray]], t: float) -> float:
    worst = 0.0
    for p, y in split.values():
        r = rates(p, y, t)
        worst = max(
            worst, r["false_abstain"] - MAX_FALSE_ABSTAIN, r["false_answer"] - MAX_FALSE_ANSWER
        )
    return worst


def likely_answered(rows: list[dict], cross: set[str]) -> set[str]:
    """Cross-set "unanswerable" questions that the corpus probably answers.

    The judge: with vectors, the dense channel ran, and both the top dense
    cosine and the top passages' term coverage reach the
    :data:`JUDGE_PERCENTILE` th percentile of the corpus's own answerable
    dev questions — the question looks at least as answered as the weakest
    tenth of real answerable questions on both signals (the judge never looks at the
    model or at held-out answerable questions). These are dropped from the
    cleaned unanswerable set; written and other-corpus questions stay.
    """
    pos = [r["hybrid"]["features"] for r in rows if r["y"] == 1 and is_dev(r["q"])]
    pos = [f for f in pos if f["cos"] > 0]
    if not pos or not cross:
        return set()
    cos_m = float(np.percentile([f["cos"] for f in pos], JUDGE_PERCENTILE))
    cov_m = float(np.percentile([f["coverage"] for f in pos], JUDGE_PERCENTILE))
    return {
        r["q"]
        for r in rows
        if r["y"] == 0
        and r["q"] in cross
        and r["hybrid"]["features"]["cos"] >= cos_m
        and r["hybrid"]["features"]["coverage"] >= cov_m
    }


def tables(data: dict[str, dict], agree_rank: int = AGREE_RANK) -> dict:
    """Fit both models on the cleaned dev halves, choose their thresholds there,
    report on the held-out halves with the full and the cleaned unanswerable sets."""
    full = {n: data[n]["rows"] for n in SETS if n in data}
    dropped = {n: likely_answered(rs, data[n].get("cross", set())) for n, rs in full.items()}
    rows = {n: [r for r in rs if r["q"] not in dropped[n]] for n, rs in full.items()}
    grid = np.round(np.arange(0.02, 0.99, 0.01), 2)
    models: dict[str, tuple] = {}
    report: dict[str, dict] = {}
    for kind in ("lexical", "hybrid"):
        coef, b = fit_model(kind, rows, agree_rank)
        models[kind] = (coef, b, 0.5)

        def split(
            dev: bool, kind: str = kind, rows: dict = rows
        ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
            out = {}
            for n, rs in rows.items():
                rs = [r for r in rs if is_dev(r["q"]) == dev]
                out[n] = (scores(kind, rs, models, agree_rank), np.array([r["y"] for r in rs]))
            return out

        dev, held = split(True), split(False)
        t = float(min(grid, key=lambda t: (excess(dev, t), -t)))
        models[kind] = (coef, b, t)
        held_full = split(False, rows=full)
        old_t = 0.64 if kind == "hybrid" else 0.57
        report[kind] = {
            "model": {
                "features": FEATURES[kind],
                "coef": [round(float(c), 6) for c in coef],
                "intercept": round(b, 6),
                "threshold": t,
            },
            "held_out": {},
            "curve": {
                str(float(x)): {n: rates(p, y, float(x)) for n, (p, y) in held.items()}
                for x in grid[::5]
            },
            "dev_excess": round(excess(dev, t), 4),
            "held_excess": round(excess(held, t), 4),
            "held_excess_full": round(excess(held_full, t), 4),
        }
        for n, (p, y) in held.items():
            rs = [r for r in rows[n] if not is_dev(r["q"])]
            old = np.array([r[kind]["old"] for r in rs])
            pf, yf = held_full[n]
            oldf = np.array([r[kind]["old"] for r in full[n] if not is_dev(r["q"])])
            report[kind]["held_out"][n] = {
                "answerable": int((y == 1).sum()),
                "unanswerable": int((y == 0).sum()),
                "unanswerable_full": int((yf == 0).sum()),
                "dropped_dev": sum(1 for q in dropped[n] if is_dev(q)),
                **rates(p, y, t),
                "full": rates(pf, yf, t),
                "previous_rule": rates(old, y, old_t),
                "previous_rule_full": rates(oldf, yf, old_t),
            }
    report["dropped"] = {n: sorted(d) for n, d in dropped.items()}
    return report


def dev_cv(data: dict[str, dict], agree_rank: int = AGREE_RANK) -> dict[str, list[float]]:
    """Worst excess over the targets of PREVIOUS vs FEATURES, by 2-fold cross-validation
    inside the cleaned dev halves (folds by another byte of the question's hash); how
    the shipped feature sets were chosen without looking at the held-out halves."""
    full = {n: data[n]["rows"] for n in SETS if n in data}
    drop = {n: likely_answered(rs, data[n].get("cross", set())) for n, rs in full.items()}
    dev = {n: [r for r in rs if is_dev(r["q"]) and r["q"] not in drop[n]] for n, rs in full.items()}
    grid = np.round(np.arange(0.02, 0.99, 0.01), 2)
    shipped = {k: list(v) for k, v in FEATURES.items()}
    out: dict[str, list[float]] = {}
    for label, feats in (("previous", PREVIOUS), ("shipped", shipped)):
        for kind in ("lexical", "hybrid"):
            FEATURES.update(feats)
            res = []
            for fold in (0, 1):
                half = {
                    n: [r for r in rs if (hashlib.sha1(r["q"].encode()).digest()[1] % 2) == fold]
                    for n, rs in dev.items()
                }
                rest = {n: [r for r in rs if r not in half[n]] for n, rs in dev.items()}
                models = {
                    k: (*fit_model(k, rest, agree_rank, dev_only=False), 0.5) for k in FEATURES
                }

                fit_split, test_split = (
                    {
                        n: (scores(kind, rs, models, agree_rank), np.array([r["y"] for r in rs]))
                        for n, rs in part.items()
                    }
                    for part in (rest, half)
                )
                t = float(min(grid, key=lambda t: (excess(fit_split, t), -t)))
                res.append(round(excess(test_split, t), 4))
            out[f"{kind} {label}"] = res
    FEATURES.update(shipped)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_datasets_flag(ap)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--cv", action="store_true", help="only compare feature sets on dev")
    args = ap.parse_args()
    data = datasets_dir(args.datasets)
    collected = {}
    for name in SETS:
        if name != "examples" and not (CACHE / "dense" / name).is_dir():
            print(f"skip {name}: run bench/dense_build.py first", file=sys.stderr)
            continue
        t0 = time.perf_counter()
        collected[name] = collect(name, data, args.queries)
        if name in OTHER:
            collected[name]["cross"] = {q.text for q in load_beir(data / OTHER[name]).queries}
        print(name, f"{time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
    if args.cv:
        for k, v in dev_cv(collected).items():
            print(f"{k}: worst excess per fold {v}, mean {np.mean(v):.4f}")
        return
    report = tables(collected)
    OUT.write_text(
        json.dumps(
            {
                "about": "fitted by bench/abstain_model.py; see clawkb/retrieve/abstain_model.py",
                "models": {k: v["model"] for k, v in report.items() if k != "dropped"},
            },
            indent=2,
        )
        + "\n"
    )
    (ROOT / "bench" / "results" / "abstain-model.json").write_text(
        json.dumps(report, indent=2) + "\n"
    )
    (ROOT / "bench" / "results" / "abstain-latest.md").write_text(markdown(report))
    print(markdown(report))


def markdown(report: dict) -> str:
    lines = [
        "# `ask` abstain: fitted model, held-out error rates",
        "",
        "`CLAWKB_DATASETS=<shared>/datasets OMP_NUM_THREADS=1 .venv/bin/python"
        " bench/abstain_model.py` (method in the script's docstring; model in",
        "src/clawkb/retrieve/abstain_model.py, coefficients in abstain_model.json).",
        "Targets: false-abstain <= 5 % on answerable, false-answer <= 10 % on unanswerable",
        "questions. Rates on the held-out half of each corpus (never seen by the fit or the",
        "threshold choice). `full` = every unanswerable question; `cleaned` = without the",
        "other-set questions a stronger judge says the corpus answers (see below);",
        "`previous` = the single-threshold rule shipped before (coverage, threshold 0.57;",
        "with vectors max(coverage, mapped cosine), threshold 0.64) on the same questions.",
    ]
    for kind, v in report.items():
        if kind == "dropped":
            continue
        title = "KB without vectors" if kind == "lexical" else "KB with e5-small vectors (hybrid)"
        lines += [
            "",
            f"## {title}: threshold {v['model']['threshold']} on P(answerable)",
            "",
            "| corpus | answerable | unanswerable cleaned / full | false-abstain"
            " | false-answer cleaned | false-answer full | previous false-abstain"
            " | previous false-answer cleaned / full |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for n, h in v["held_out"].items():
            p, pf = h["previous_rule"], h["previous_rule_full"]
            lines.append(
                f"| {n} | {h['answerable']} | {h['unanswerable']} / {h['unanswerable_full']}"
                f" | {h['false_abstain']:.1%} | {h['false_answer']:.1%}"
                f" | {h['full']['false_answer']:.1%} | {p['false_abstain']:.1%}"
                f" | {p['false_answer']:.1%} / {pf['false_answer']:.1%} |"
            )
        lines += [
            "",
            "Trade-off on the held-out halves, cleaned unanswerable sets"
            " (false-abstain / false-answer):",
            "",
        ]
        names = list(v["held_out"])
        lines += ["| threshold | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        for t, row in v["curve"].items():
            cells = [f"{row[n]['false_abstain']:.0%} / {row[n]['false_answer']:.0%}" for n in names]
            lines.append(f"| {t} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Cleaned unanswerable sets",
        "",
        "Dropped from the unanswerable side (dev and held-out halves) as probably answered"
        f" by the corpus (`likely_answered`: dense cosine and coverage both at least the"
        f" {JUDGE_PERCENTILE}th percentile of the corpus's answerable dev questions):",
        "",
    ]
    for n, qs in report.get("dropped", {}).items():
        lines.append(f"- {n}: {len(qs)}" + (" — " + "; ".join(qs) if qs else ""))
    reading = ROOT / "bench" / "results" / "abstain-reading.md"
    if reading.is_file():
        lines += ["", reading.read_text("utf-8").rstrip()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
