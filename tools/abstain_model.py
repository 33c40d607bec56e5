"""Fit the abstain model `search` and `ask` share (clawkb.retrieve.abstain_model); held-out rates.

    CLAWKB_DATASETS=<shared>/datasets OMP_NUM_THREADS=1 .venv/bin/python tools/abstain_model.py \
        --kb esp-idf-en=<embedded KB of some en/ pages> --kb esp-idf-zh=<... zh_CN/ pages>

1. Questions per corpus (the shared sets whose e5 KB is in bench/.cache/dense —
   bench/dense_build.py —, the bundled examples, and esp-idf-docs KBs given with
   ``--kb``): answerable = the set's own judged queries (examples: questions.yaml
   and the two golden files; esp-idf-docs: the golden queries of the KB's pages,
   ``ident`` / ``ident_zh`` / ``zh2en`` on an en/ KB, ``en2zh`` on a zh_CN/ one);
   unanswerable = the other same-language set's queries (esp-idf-docs: headings of
   the pages left out of the KB), written off-topic questions, other domains'
   questions, and generated questions about nothing (letter and CJK soup,
   keyboard runs: bench/notfound_rates.nonsense).
2. For every question, the decision `clawkb search` takes on the KB with its
   vectors (``features`` of the hybrid model, or of the lexical one on an early
   return; whether the exact-anchor / identifier rule answers it regardless), and
   the features `ask` computes on the same KB without vectors in use
   (``mode=lexical``); the shipped model's verdicts are kept as "previous". Cached
   in bench/.cache/abstain.
3. Cleaning: the other same-language set's queries are not all unanswerable
   (a qbqtc web query can be answered by a cmrc Wikipedia paragraph). Those
   a stronger judge says the corpus answers — dense cosine and term coverage
   both at least the 10th percentile of the corpus's own answerable dev questions
   (``likely_answered``) — are dropped from the cleaned unanswerable set. The
   esp-idf-docs left-out headings are all dropped from it (``_dropped``): the pages
   overlap too much for them to be unanswerable; they are reported, never fitted.
4. Each question is put in the dev or the held-out half by a hash of its
   text. The models in ``--refit`` (default: hybrid) are fitted on the cleaned dev
   halves of all corpora pooled (per corpus: answerable 1, questions about nothing
   1/2, other unanswerable 1/2; L2), without the questions the anchor rule answers
   anyway; the threshold minimises, on the cleaned dev halves, the worst excess
   over the targets (false-abstain - 5 %, false-answer - 10 %) over all corpora.
   Writes src/clawkb/retrieve/abstain_model.json, then reports false-abstain /
   false-answer per corpus on the held-out halves (false-answer on the cleaned and
   on the full unanswerable sets) beside the previously shipped model on the same
   questions, and the trade-off curve (bench/results/abstain-model.json).
   ``--cv`` compares the feature sets by 2-fold cross-validation inside the dev
   halves only.

The shipped model with vectors (``hybrid``) is refitted on `clawkb search`'s own
decisions by tools/notfound_fit.py (from bench/notfound_rates.py's records); a
``--refit hybrid`` here replaces it with one fitted on this script's corpora.
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

import bench_path  # noqa: F401  (bench/ helpers below)
from abstain_questions import OFF_TOPIC, OTHER
from clawkb.evaluate.beir import load_beir
from clawkb.retrieve.abstain_model import AGREE_RANK, derived, value
from notfound_rates import engdocs_queries, nonsense
from shared_data import add_datasets_flag, datasets_dir

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "bench" / ".cache"
OUT = ROOT / "src" / "clawkb" / "retrieve" / "abstain_model.json"
SHARED = ("cranfield", "agentset-msmarco", "cmrc2018-dev", "qbqtc-dev")
SETS = (*SHARED, "examples", "esp-idf-en", "esp-idf-zh")
#: Every signal also enters multiplied by the question's CJK share: Chinese bigram
#: coverage behaves unlike English word coverage (in effect one model per script).
_LEX = ["coverage", "matched", "lex_norm", "lang_diff", "cov2", "cov5", "rare_hit", "rare_idf"]
_KB = ["known", "unknown"]
_HYB = [*_LEX, "dconf", "agree", "dgap", "dz", *_KB]
FEATURES = {
    "lexical": ["cjk", *_LEX, *_KB, *(f"cjk*{f}" for f in [*_LEX, *_KB])],
    "hybrid": ["cjk", *_HYB, *(f"cjk*{f}" for f in _HYB)],
}
#: The feature sets shipped before the dense background and KB-wide term features,
#: compared by ``--cv``.
_OLD_HYB = [*_LEX, "dconf", "agree"]
PREVIOUS = {
    "lexical": ["cjk", *_LEX, *(f"cjk*{f}" for f in _LEX)],
    "hybrid": ["cjk", *_OLD_HYB, *(f"cjk*{f}" for f in _OLD_HYB)],
}
#: Generated questions about nothing (letter and CJK soup, keyboard runs, off-topic).
NONSENSE = frozenset(nonsense(80)) | frozenset(OFF_TOPIC)
#: The judge of ``likely_answered``: percentile of the answerable dev questions' signals.
JUDGE_PERCENTILE = 10
#: The models refitted (``--refit``); the others stay as shipped in abstain_model.json.
REFIT = {"hybrid"}
MAX_FALSE_ABSTAIN = 0.05
MAX_FALSE_ANSWER = 0.10


def _examples_questions() -> list[str]:
    doc = yaml.safe_load((ROOT / "examples" / "questions.yaml").read_text("utf-8"))
    out = [q["question"] for q in doc["questions"]]
    for name in ("golden.yaml", "hardware-golden.yaml"):
        g = yaml.safe_load((ROOT / "examples" / name).read_text("utf-8"))
        out += [q["query"] for q in g["queries"]]
    return list(dict.fromkeys(out))


def questions(name: str, data: Path, n: int, kb: object = None) -> tuple[list[str], list[str]]:
    from clawkb.evaluate.beir import load_beir

    rng = random.Random(13)
    if name.startswith("esp-idf"):  # golden queries of the KB's pages; left-out headings
        pos, neg = engdocs_queries(name, data, kb, n)
        for other in SHARED:  # other domains' questions, in both languages
            neg += rng.sample([q.text for q in load_beir(data / other).queries], 30)
        return pos, list(dict.fromkeys(neg + OFF_TOPIC + nonsense(80)))
    if name == "examples":
        doc = yaml.safe_load((ROOT / "examples" / "questions.yaml").read_text("utf-8"))
        neg = OFF_TOPIC + doc.get("unanswerable", [])
        for other in SHARED:
            qs = [q.text for q in load_beir(data / other).queries]
            neg += rng.sample(qs, 40)
        return _examples_questions(), list(dict.fromkeys(neg + nonsense(80)))
    judged = [
        q.text for q in load_beir(data / name).queries if any(g > 0 for g in q.qrels.values())
    ]
    other = [q.text for q in load_beir(data / OTHER[name]).queries]
    neg = rng.sample(other, min(n, len(other))) + OFF_TOPIC + _examples_questions()[:20]
    return rng.sample(judged, min(n, len(judged))), list(dict.fromkeys(neg + nonsense(80)))


def kb_home(name: str, kbs: dict[str, Path]) -> Path | None:
    """Where the embedded KB of ``name`` is (None: the examples, built here)."""
    if name in kbs:
        return kbs[name]
    return None if name == "examples" else CACHE / "dense" / name


def collect(name: str, data: Path, n: int, kbs: dict[str, Path]) -> dict:
    """Per question: the features of the decision `search` takes (hybrid, as
    `clawkb search` runs it once the KB has vectors: the hybrid model when the
    dense channel ran, the lexical one on an early return) and of `ask` on the
    same KB without vectors in use (``mode=lexical``), and the shipped model's
    P(answerable) and verdict for both (the "before" of a refit)."""
    if name.startswith("esp-idf"):  # every golden query of an 80-page KB's pages
        n = max(n, 300)
    path = CACHE / "abstain" / f"{name}-{n}-v3.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())
    import shutil

    from clawkb.embed.e5 import E5Small
    from clawkb.embed.run import embed_kb
    from clawkb.kb import KnowledgeBase
    from clawkb.retrieve import notfound
    from clawkb.retrieve.abstain_model import decide
    from clawkb.retrieve.notfound import verbatim
    from clawkb.retrieve.pipeline import retriever_for

    emb = E5Small()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "kb"
        src = kb_home(name, kbs)
        if src is not None:  # a copy: the original is never written
            shutil.copytree(src, home, ignore=shutil.ignore_patterns("*.lock"))
        kb = KnowledgeBase.open(home, create=src is None)
        if src is None:
            kb.index([ROOT / "examples" / "notes", ROOT / "examples" / "datasheets"])
            embed_kb(kb, embedder=emb)
        retriever_for(kb).set_embedder(emb)
        pos, neg = questions(name, data, n, kb)

        def row(q: str) -> dict:
            res = kb.search(q, limit=3, budget_dense_ms=120_000.0)
            d = res.decision
            feats = dict(d.features) if d is not None else {}
            hyb = {
                "features": feats,
                "old": float(d.value) if d is not None else 1.0,
                "old_threshold": float(d.threshold) if d is not None else 0.0,
                # notfound.judge's rule: a selective anchor or an identifier held verbatim
                "forced": feats.get("anchor", 0.0) > 0
                or verbatim(q, (res.hits or res.nearest)[: notfound.VERBATIM_DEPTH]),
            }
            hits = kb.search(q, limit=8, mode="lexical").hits
            c = decide(kb.lexical, q, hits, vectors=False)
            lex = {"features": dict(c.features), "old": float(c.value),
                   "old_threshold": float(c.threshold), "forced": False}  # fmt: skip
            return {"hybrid": hyb, "lexical": lex}

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
            and not r[kind].get("forced")  # the anchor rule answers these, not the model
        ]
        x = np.array(
            [[value(row_features(r, kind, agree_rank), c) for c in FEATURES[kind]] for r in rs]
        )
        y = np.array([r["y"] for r in rs], float)
        junk = np.array([r["q"] in NONSENSE for r in rs], bool)
        # answerable; questions about nothing; other unanswerable ones: equal weight
        for m, share in ((y == 1, 1.0), ((y == 0) & junk, 0.5), ((y == 0) & ~junk, 0.5)):
            if m.any():
                xs.append(x[m])
                ys.append(y[m])
                ws.append(np.full(m.sum(), share / m.sum()))
    return fit(np.vstack(xs), np.concatenate(ys), np.concatenate(ws) * 100)


def scores(kind: str, rs: list[dict], models: dict, agree_rank: int) -> np.ndarray:
    """P(answerable) per row; a hybrid row whose dense channel was skipped (lexical
    early return) is decided by the lexical model, as `ask` does: +-inf."""
    out = []
    for r in rs:
        if r[kind].get("forced"):  # always answered, whatever the model says
            out.append(np.inf)
            continue
        use = kind if kind == "lexical" or r[kind]["features"]["cos"] > 0 else "lexical"
        coef, b, t = models[use]
        x = np.array([value(row_features(r, kind, agree_rank), c) for c in FEATURES[use]])
        p = float(1 / (1 + np.exp(-(x @ coef + b))))
        out.append(p if use == kind else (np.inf if p >= t else -np.inf))
    return np.array(out)


def _old(row: dict, kind: str) -> float:
    """The shipped model's verdict on ``row`` as a margin: >= 0 answers."""
    r = row[kind]
    if kind == "hybrid" and r.get("forced"):
        return 1.0
    return float(r["old"]) - float(r["old_threshold"])


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


def _dropped(name: str, rows: list[dict], cross: set[str]) -> set[str]:
    """The unanswerable questions left out of the fit and of the cleaned rates.

    esp-idf-docs: every heading of a left-out page. The pages overlap (a left-out
    page's "GPIO 驱动程序" or "Application Examples" has a section on a kept page), so
    these are not reliably unanswerable; they are reported (``full``), never fitted.
    """
    if name.startswith("esp-idf"):
        return {r["q"] for r in rows if r["y"] == 0 and r["q"] in cross}
    return likely_answered(rows, cross)


def tables(data: dict[str, dict], agree_rank: int = AGREE_RANK) -> dict:
    """Fit both models on the cleaned dev halves, choose their thresholds there,
    report on the held-out halves with the full and the cleaned unanswerable sets."""
    full = {n: data[n]["rows"] for n in SETS if n in data}
    dropped = {n: _dropped(n, rs, data[n].get("cross", set())) for n, rs in full.items()}
    rows = {n: [r for r in rs if r["q"] not in dropped[n]] for n, rs in full.items()}
    grid = np.round(np.arange(0.02, 0.99, 0.01), 2)
    models: dict[str, tuple] = {}
    report: dict[str, dict] = {}
    for kind in ("lexical", "hybrid"):
        keep = kind not in REFIT and OUT.is_file()
        if keep:  # the shipped model, reported on the same questions, not refitted
            spec = json.loads(OUT.read_text("utf-8"))["models"][kind]
            FEATURES[kind] = list(spec["features"])
            coef, b = np.array(spec["coef"], float), float(spec["intercept"])
        else:
            coef, b = fit_model(kind, rows, agree_rank)
        models[kind] = (coef, b, float(spec["threshold"]) if keep else 0.5)

        def split(
            dev: bool, kind: str = kind, rows: dict = rows
        ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
            out = {}
            for n, rs in rows.items():
                rs = [r for r in rs if is_dev(r["q"]) == dev]
                out[n] = (scores(kind, rs, models, agree_rank), np.array([r["y"] for r in rs]))
            return out

        dev, held = split(True), split(False)
        t = models[kind][2] if keep else float(min(grid, key=lambda t: (excess(dev, t), -t)))
        models[kind] = (coef, b, t)
        held_full = split(False, rows=full)
        old_t = 0.0  # "old": the shipped model's P minus its threshold (forced: answered)
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
            old = np.array([_old(r, kind) for r in rs])
            pf, yf = held_full[n]
            oldf = np.array([_old(r, kind) for r in full[n] if not is_dev(r["q"])])
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
    drop = {n: _dropped(n, rs, data[n].get("cross", set())) for n, rs in full.items()}
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
    ap.add_argument(
        "--refit",
        action="append",
        choices=("lexical", "hybrid"),
        help="models to refit (default: hybrid; the lexical one stays as shipped)",
    )
    ap.add_argument("--collect-only", action="store_true", help="cache the features and stop")
    ap.add_argument("--only", action="append", default=[], help="collect only these sets")
    ap.add_argument(
        "--kb",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="an embedded KB for a set (copied first); esp-idf-en / esp-idf-zh need one",
    )
    args = ap.parse_args()
    if args.refit:
        REFIT.clear()
        REFIT.update(args.refit)
    data = datasets_dir(args.datasets)
    kbs = {n: Path(d) for n, _, d in (k.partition("=") for k in args.kb)}
    collected = {}
    for name in args.only or SETS:
        home = kb_home(name, kbs)
        cached = any((CACHE / "abstain").glob(f"{name}-*-v3.pkl"))
        if home is not None and not home.is_dir() and not cached:
            print(f"skip {name}: no embedded KB (--kb {name}=DIR)", file=sys.stderr)
            continue
        t0 = time.perf_counter()
        collected[name] = collect(name, data, args.queries, kbs)
        if name in OTHER:
            collected[name]["cross"] = {q.text for q in load_beir(data / OTHER[name]).queries}
        elif name.startswith("esp-idf"):  # headings of left-out pages may be answered
            with open(data / "esp-idf-docs" / "golden.tsv", encoding="utf-8") as fh:
                collected[name]["cross"] = {line.split("\t")[0] for line in fh}
        print(name, f"{time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
    if args.collect_only:
        return
    if args.cv:
        for k, v in dev_cv(collected).items():
            print(f"{k}: worst excess per fold {v}, mean {np.mean(v):.4f}")
        return
    report = tables(collected)
    OUT.write_text(
        json.dumps(
            {
                "about": "fitted by tools/abstain_model.py; see clawkb/retrieve/abstain_model.py",
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
        " tools/abstain_model.py` (method in the script's docstring; model in",
        "src/clawkb/retrieve/abstain_model.py, coefficients in abstain_model.json).",
        "Targets: false-abstain <= 5 % on answerable, false-answer <= 10 % on unanswerable",
        "questions. Rates on the held-out half of each corpus (never seen by the fit or the",
        "threshold choice). `full` = every unanswerable question; `cleaned` = without the",
        "other-set questions a stronger judge says the corpus answers (see below);",
        "`previous` = the model shipped when the features were collected (its own",
        "threshold; with vectors, with the identifier rule) on the same questions.",
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
        if n.startswith("esp-idf"):
            lines.append(
                f"- {n}: {len(qs)} headings of left-out pages (never fitted; see `_dropped`)"
            )
            continue
        lines.append(f"- {n}: {len(qs)}" + (" — " + "; ".join(qs) if qs else ""))
    reading = ROOT / "bench" / "results" / "abstain-reading.md"
    if reading.is_file():
        lines += ["", reading.read_text("utf-8").rstrip()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
