"""Refit the hybrid abstain model on the searches bench/notfound_rates.py recorded.

    .venv/bin/python tools/notfound_fit.py [--write] [--add a*b,...] [--brief]

bench/notfound_rates.py records, for every query it sends through `clawkb search`
(default mode, vectors on), the decision's features. This script fits the hybrid
model (`search`'s and `ask`'s decision when the dense channel ran) on the **dev
halves** of those rows only, pooled over every KB measured:

* answerable = the KB's own judged queries (weight 1 per KB);
* unanswerable = generated nonsense (``soup``) and the other same-language set's
  queries (``other``), weight 1/2 each per KB (``--fit`` chooses the groups).

The queries whose relevant documents were left out of the KB (``left_out``) and the
written off-topic questions are not fitted by default: on a redundant corpus a
left-out query is often answered by a neighbouring passage, and a web corpus may
answer a recipe question (bench/results/notfound-rates.md); they are reported. Rows
the identifier / exact-anchor rule answers regardless, and rows whose dense channel
was skipped (the lexical model decides them), are not fitted either. The threshold
minimises, on the dev halves, the worst excess over the targets (false-abstain 5 %,
nonsense answered 5 %, other-set answered 10 %) over all KBs (``--target``,
``--limit``). Held-out rates are printed per KB and
group; ``--write`` stores the model in src/clawkb/retrieve/abstain_model.json
(the lexical model is kept).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

import bench_path  # noqa: F401  (bench/ on sys.path)
from abstain_model import fit
from notfound_rates import UNANSWERABLE, is_dev

ROOT = Path(__file__).resolve().parents[1]
RATES = ROOT / "bench" / ".cache" / "notfound-rows.json"
MODEL = ROOT / "src" / "clawkb" / "retrieve" / "abstain_model.json"
#: Unanswerable groups the model is fitted on, and those the threshold answers to
#: (with the answerable queries' false-abstain); set by --fit / --target.
FITTED = ["soup", "other"]
TARGETED = ["soup", "other"]
TARGET = 0.05
#: Per-group limits other than TARGET (--limit group=value).
LIMIT: dict[str, float] = {"other": 0.10}


def value(feats: dict, name: str) -> float:
    out = 1.0
    for part in name.split("*"):
        out *= float(feats.get(part, 0.0))
    return out


def kb_levels(report: dict) -> tuple[float, float]:
    """The KB's "nothing" level per script: mean top cosine of its probe queries
    (generated, never rated), Latin and CJK."""
    lat, cjk = [], []
    for row in report["rows"].get("probe", []):
        f = row["features"]
        if f.get("cos", 0) > 0:
            (cjk if f.get("cjk", 0) > 0.5 else lat).append(f["cos"])
    mean = lambda v: float(np.mean(v)) if v else 0.0  # noqa: E731
    return mean(lat), mean(cjk)


def enrich(reports: list[dict]) -> None:
    """Per-KB calibrated features added to each recorded row (see kb_levels)."""
    for r in reports:
        lat, cjk = kb_levels(r)
        for rows in r["rows"].values():
            for row in rows:
                f = row["features"]
                if not f:
                    continue
                share = f.get("cjk", 0.0)
                nothing = share * cjk + (1 - share) * lat
                c = f.get("cos", 0.0)
                if "cos_over" not in f:  # rows recorded before the shipped feature
                    f["cos_over"] = min(1.0, max(-1.0, 10 * (c - nothing))) if c > 0 else 0.0
                f["qlen"] = min(len(row["q"]), 40) / 40


def rows_of(reports: list[dict], dev: bool | None) -> list[tuple[str, str, dict]]:
    out = []
    for r in reports:
        for g, rs in r["rows"].items():
            for row in rs:
                if dev is None or is_dev(row["q"]) == dev:
                    out.append((r["kb"], g, row))
    return out


def judged(row: dict) -> bool:
    """The model decides this row (dense ran, no rule answered it regardless)."""
    return bool(row["dense_ran"]) and row.get("rule") == "model"


def design(rows: list[tuple[str, str, dict]], feats: list[str]) -> np.ndarray:
    return np.array([[value(r[2]["features"], f) for f in feats] for r in rows], float)


def fit_rows(reports: list[dict], feats: list[str], l2: float) -> tuple[np.ndarray, float]:
    rows = [r for r in rows_of(reports, True) if judged(r[2])]
    xs, ys, ws = [], [], []
    for kb in {r[0] for r in rows}:
        for groups, y, share in ((("answerable",), 1, 1.0), (tuple(FITTED), 0, 1.0)):
            for g in groups:
                part = [r for r in rows if r[0] == kb and r[1] == g]
                if not part:
                    continue
                xs.append(design(part, feats))
                ys.append(np.full(len(part), y, float))
                w = share / len(part) / (1 if y else len(groups))
                ws.append(np.full(len(part), w))
    return fit(np.vstack(xs), np.concatenate(ys), np.concatenate(ws) * 100, l2)


def decisions(
    reports: list[dict], dev: bool | None, coef: np.ndarray, b: float, feats: list[str], t: float
) -> dict[tuple[str, str], list[bool]]:
    """Abstained per (KB, group): the model where it decides, else the recorded verdict."""
    out: dict[tuple[str, str], list[bool]] = {}
    for kb, g, row in rows_of(reports, dev):
        if judged(row):
            x = np.array([value(row["features"], f) for f in feats])
            p = 1 / (1 + np.exp(-(x @ coef + b)))
            ab = bool(p < t)
        else:
            ab = bool(row["abstained"])
        out.setdefault((kb, g), []).append(ab)
    return out


def errors(dec: dict[tuple[str, str], list[bool]]) -> dict[tuple[str, str], float]:
    return {
        k: float(np.mean([not a for a in v]) if k[1] != "answerable" else np.mean(v))
        for k, v in dec.items()
        if v
    }


def worst(err: dict[tuple[str, str], float]) -> float:
    return max(
        (
            e - LIMIT.get(g, TARGET)
            for (kb, g), e in err.items()
            if g == "answerable" or g in TARGETED
        ),
        default=0.0,
    )


def choose_threshold(reports: list[dict], coef: np.ndarray, b: float, feats: list[str]) -> float:
    grid = np.round(np.arange(0.05, 0.96, 0.01), 2)
    scored = [(worst(errors(decisions(reports, True, coef, b, feats, t))), t) for t in grid]
    return float(min(scored)[1])


def table(reports: list[dict], dev: bool, coef: np.ndarray, b: float, feats: list[str],
          t: float, label: str) -> str:  # fmt: skip
    new = errors(decisions(reports, dev, coef, b, feats, t))
    old: dict[tuple[str, str], float] = {}
    for kb, g, row in rows_of(reports, dev):
        old.setdefault((kb, g), []).append(bool(row["abstained"]))  # type: ignore[arg-type, attr-defined]
    old = errors(old)  # type: ignore[arg-type]
    groups = ["answerable", *UNANSWERABLE]
    lines = [
        f"{label}: error rate, shipped → refit (threshold {t:.2f}); n per cell",
        "",
        "| KB | " + " | ".join(groups) + " |",
        "|---|" + "---:|" * len(groups),
    ]
    counts: dict[tuple[str, str], int] = {}
    for kb, g, _ in rows_of(reports, dev):
        counts[(kb, g)] = counts.get((kb, g), 0) + 1
    for kb in dict.fromkeys(r["kb"] for r in reports):
        cells = []
        for g in groups:
            k = (kb, g)
            cells.append(f"{counts[k]}: {old[k]:.1%} → {new[k]:.1%}" if k in new else "–")
        lines.append(f"| {kb} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--features", help="comma-separated feature names (default: the shipped)")
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--rates", default=str(RATES))
    ap.add_argument("--fit", default=",".join(FITTED), help="unanswerable groups fitted")
    ap.add_argument("--target", default=",".join(TARGETED),
                    help="unanswerable groups the threshold answers to")  # fmt: skip
    ap.add_argument("--add", default="", help="features added to the shipped list")
    ap.add_argument("--drop", default="", help="features removed from it")
    ap.add_argument("--brief", action="store_true")
    ap.add_argument("--threshold", type=float, help="instead of the dev-chosen one")
    ap.add_argument("--limit", action="append", default=[], metavar="GROUP=RATE")
    args = ap.parse_args()
    LIMIT.update({k: float(v) for k, v in (x.split("=") for x in args.limit)})
    FITTED[:] = args.fit.split(",")
    TARGETED[:] = args.target.split(",")
    reports = json.loads(Path(args.rates).read_text())
    enrich(reports)
    model = json.loads(MODEL.read_text())
    feats = args.features.split(",") if args.features else model["models"]["hybrid"]["features"]
    feats = [f for f in feats if f not in args.drop.split(",")]
    feats += [f for f in args.add.split(",") if f and f not in feats]
    coef, b = fit_rows(reports, feats, args.l2)
    t = args.threshold if args.threshold is not None else choose_threshold(reports, coef, b, feats)
    dev_worst = worst(errors(decisions(reports, True, coef, b, feats, t)))
    held_worst = worst(errors(decisions(reports, False, coef, b, feats, t)))
    print(f"features {len(feats)}; threshold {t:.2f}; worst excess dev {dev_worst:.3f}"
          f" held-out {held_worst:.3f}", file=sys.stderr)  # fmt: skip
    if args.brief:
        for dev in (True, False):
            err = errors(decisions(reports, dev, coef, b, feats, t))
            line = []
            for g in ("answerable", "soup", "other", "left_out", "offtopic"):
                vals = [f"{100 * e:.0f}" for (kb, gg), e in sorted(err.items()) if gg == g]
                line.append(f"{g[:4]} " + "/".join(vals))
            print(("dev  " if dev else "held ") + " | ".join(line))
        return
    print(table(reports, True, coef, b, feats, t, "Dev halves"))
    print()
    print(table(reports, False, coef, b, feats, t, "Held-out halves"))
    if args.write:
        model["models"]["hybrid"] = {
            "features": feats,
            "coef": [round(float(c), 6) for c in coef],
            "intercept": round(b, 6),
            "threshold": t,
        }
        model["about"] = (
            "lexical: fitted by tools/abstain_model.py; hybrid: by tools/notfound_fit.py;"
            " see clawkb/retrieve/abstain_model.py"
        )
        MODEL.write_text(json.dumps(model, indent=2) + "\n")


if __name__ == "__main__":
    main()
