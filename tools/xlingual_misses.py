"""Why a cross-lingual heading query misses: one line per query of esp-idf-docs.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python tools/xlingual_misses.py \
        --cache DIR --work DIR --qvec FILE [--half dev] [--kinds zh2en,en2zh] [--out FILE]

For every ``zh2en`` / ``en2zh`` query of one half it runs the default mode and
records: the rank of the expected page, the title the cross-language lead
chose (and whether it is on the expected page), the rank among titles of the
other script of the best title on the expected page, and the five best
other-script titles with their pages. A JSON line per query goes to ``--out``;
a summary to stdout. The title cosines are read from the title channel's own
hook, so what is printed is what the search saw.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

import bench_path  # noqa: F401  (bench/ on sys.path)

ROOT = Path(__file__).resolve().parents[1]


def _pages(sec: Any, t: int, path_of: dict[int, str]) -> list[str]:
    """The files of the sections title ``t`` heads."""
    return sorted({path_of[int(c)] for c in sec.starts[t]})


def main(argv: list[str]) -> None:
    import engdocs  # type: ignore[import-not-found]
    from clawkb.embed.titles import title_index
    from clawkb.kb import KnowledgeBase
    from clawkb.retrieve import titles

    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--qvec", type=Path, required=True)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "datasets")
    ap.add_argument("--half", default="dev")
    ap.add_argument("--kinds", default="zh2en,en2zh")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    kinds = a.kinds.split(",")
    rows = [r for r in engdocs.golden(a.data) if r["kind"] in kinds]
    rows = [r for r in rows if a.half == "all" or engdocs.half(r["query"]) == a.half]
    a.work.mkdir(parents=True, exist_ok=True)
    qv = engdocs.QueryVectors(a.qvec)
    seen: dict[str, Any] = {}
    orig = titles.add_channel

    def spy(source: Any, texts: Any, channels: Any, scope: Any, query_chinese: Any = None) -> Any:
        r = source.retriever
        index = r.dense_index()
        sec, mat = title_index(source.kb, r.embedder, index.mkey)
        q = np.asarray(r.qvec_cache.get((index.mkey, *texts)))
        seen["cos"] = titles._sims(mat, q)[:, 0]
        seen["sec"] = sec
        seen["dense_top"] = float(channels["dense"].scores[0])
        return orig(source, texts, channels, scope, query_chinese)

    titles.add_channel = spy  # type: ignore[assignment]
    lines = []
    for lang in ("en", "zh"):
        want_kinds = [k for k in kinds if engdocs.KIND_TREE[k] == lang]
        if not want_kinds:
            continue
        kb = KnowledgeBase.open(engdocs.working_copy(a.cache / lang, a.work))
        engdocs.attach_vectors(kb, qv)
        path_of = {
            int(c): str(p)
            for c, p in kb.conn.execute(
                "SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id = c.doc_id"
            )
        }
        for r in rows:
            if r["kind"] not in want_kinds:
                continue
            seen.clear()
            ranks = {}
            for mode in ("auto", "lexical", "dense"):
                res = kb.search(r["query"], limit=20, snippets=False, **engdocs.MODE_OPTIONS[mode])
                pages: list[str] = []
                for h in res.hits or res.nearest:
                    if h.anchor.path not in pages:
                        pages.append(h.anchor.path)
                ranks[mode] = engdocs.rank_of(pages, r["expect"])
                if mode == "auto":
                    top3 = [
                        p.split("/" + lang + "/", 1)[-1].split("/zh_CN/", 1)[-1] for p in pages[:3]
                    ]
                    cos, sec = seen.get("cos"), seen.get("sec")
            row: dict[str, Any] = {"kind": r["kind"], "query": r["query"], "expect": r["expect"],
                                   "rank": ranks, "top3": top3}  # fmt: skip
            if cos is not None:
                zh = titles._chinese_titles(sec)
                other = np.flatnonzero(zh != (r["kind"] == "zh2en"))
                order = other[np.argsort(-cos[other], kind="stable")]

                on = [
                    i for i, t in enumerate(order[:200].tolist())
                    if any(engdocs.rank_of([p], r["expect"]) for p in _pages(sec, t, path_of))
                ]  # fmt: skip
                row["exp_title_rank"] = on[0] + 1 if on else None
                row["dense_top"] = round(seen["dense_top"], 4)
                row["titles"] = [
                    (sec.titles[t], round(float(cos[t]), 4), len(sec.starts[t]),
                     [p.rsplit("/", 2)[-2] + "/" + p.rsplit("/", 1)[-1]
                      for p in _pages(sec, t, path_of)][:3])
                    for t in order[:5].tolist()
                ]  # fmt: skip
            lines.append(row)
        kb.close()
    qv.save()
    for k in kinds:
        ks = [x for x in lines if x["kind"] == k]
        hit = sum(1 for x in ks if x["rank"]["auto"] and x["rank"]["auto"] <= 3)
        miss = [x for x in ks if not (x["rank"]["auto"] and x["rank"]["auto"] <= 3)]
        tr = [x.get("exp_title_rank") for x in miss]
        print(f"{k}: n={len(ks)} hit@3={hit / max(1, len(ks)):.3f} misses={len(miss)} "
              f"exp title rank among misses: 1:{sum(1 for t in tr if t == 1)} "
              f"2-5:{sum(1 for t in tr if t and 2 <= t <= 5)} "
              f"6-20:{sum(1 for t in tr if t and 6 <= t <= 20)} "
              f">20:{sum(1 for t in tr if not t or t > 20)}")  # fmt: skip
    if a.out:
        a.out.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), "utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
