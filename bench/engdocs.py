"""Relevance on engineering docs (esp-idf-docs) and the shared BEIR sets, per mode.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python bench/engdocs.py [--cache DIR] [--build-only]

One command rebuilds what is missing and re-runs the whole table:

1. Builds (once) a KB per language tree of ``esp-idf-docs`` (``en``, ``zh_CN``),
   indexed as a user would (``KnowledgeBase.index``) and embedded with the
   shipped e5 model, under ``--cache`` (default ``bench/.cache/engdocs``). Each
   KB is built in a temporary folder and renamed when complete, with a ``DONE``
   marker, so another process can reuse a cache that is there. The shared BEIR
   sets are built by :mod:`dense_build` under ``--beir-cache``.
2. Runs ``golden.tsv`` in lexical / dense / hybrid / auto and reports hit@3 and
   MRR per kind, split into a dev half and a held-out half by a stable hash of
   the query text; then nDCG@10 per mode on every shared set, split the same way.
3. Writes ``bench/results/engdocs.json`` and ``engdocs.md`` (``--tag`` names
   the run, so a baseline and a later run sit side by side in the JSON).

A chunking change (a new parser) makes a cached KB stale: ``--rebuild`` drops
the esp-idf KBs first (the lexical index follows tokenizer changes by itself).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from shared_data import add_datasets_flag, datasets_dir

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent
TREES = {"en": "en", "zh": "zh_CN"}
KIND_TREE = {"zh2en": "en", "ident": "en", "ident_zh": "en", "en2zh": "zh"}
KINDS = ("ident", "ident_zh", "zh2en", "en2zh")
MODES = ("lexical", "dense", "hybrid", "auto")
#: Query vectors kept between runs (set from --qvec).
QVEC = ROOT / ".cache" / "engdocs-qvec"
BEIR = ("cranfield", "agentset-msmarco", "cmrc2018-dev", "qbqtc-dev")
K = 3


def half(text: str) -> str:
    """``dev`` or ``held``: a stable split by a hash of the query text."""
    return "dev" if hashlib.sha1(text.encode()).digest()[0] % 2 == 0 else "held"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- building ---------------------------------------------------------------
def build_tree(tree: Path, home: Path) -> None:
    """Index and embed one language tree into ``home`` (atomic: tmp folder, rename, DONE)."""
    from clawkb.embed.e5 import E5Small
    from clawkb.embed.run import embed_kb
    from clawkb.kb import KnowledgeBase

    if (home / "DONE").exists():
        return
    tmp = home.with_name(home.name + ".tmp")
    home.parent.mkdir(parents=True, exist_ok=True)
    kb = KnowledgeBase.open(tmp, create=True)  # resumes a half-built tmp folder
    try:
        if kb.status()["chunks"] == 0:
            t = time.perf_counter()
            rep = kb.index([tree])
            log(f"{home.name}: indexed {kb.status()['chunks']} chunks in "
                f"{time.perf_counter() - t:.0f}s ({rep.failed} failed)")  # fmt: skip
        last = [0.0]

        def progress(done: int, total: int) -> None:
            if time.monotonic() - last[0] > 60 or done == total:
                last[0] = time.monotonic()
                log(f"  {home.name}: embedded {done}/{total}")

        cpu = time.process_time()
        rep = embed_kb(kb, embedder=E5Small(), progress=progress)
        log(f"{home.name}: embedded {rep.embedded} in {time.process_time() - cpu:.0f} CPU s")
    finally:
        kb.close()
    if home.exists():
        shutil.rmtree(home)
    tmp.rename(home)
    (home / "DONE").write_text(time.strftime("%Y-%m-%dT%H:%M:%S") + "\n")


def chosen_pages(data: Path, pages: int) -> set[str] | None:
    """``pages`` golden pages chosen by a stable hash of their path (None = every page).

    A smaller KB for a machine that cannot embed the whole set in time: the
    scores are higher (fewer distractors) but modes and runs stay comparable.
    """
    if not pages:
        return None
    paths = sorted(
        {r["expect"] for r in golden(data)}, key=lambda p: hashlib.sha1(p.encode()).hexdigest()
    )
    return set(paths[:pages])


def tree_of(data: Path, cache: Path, lang: str, pages: set[str] | None) -> Path:
    """The folder to index for ``lang``: the real tree, or a copy of the chosen pages."""
    tree = data / "esp-idf-docs" / TREES[lang]
    if pages is None:
        return tree
    staged = cache / "pages" / TREES[lang]
    if not staged.exists():
        tmp = staged.with_name(staged.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        for rel in sorted(pages):
            if (tree / rel).exists():
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(tree / rel, tmp / rel)
        tmp.rename(staged)
    return staged


def build_all(
    data: Path,
    cache: Path,
    beir_cache: Path,
    beir: Iterable[str],
    trees: Iterable[str],
    pages: set[str] | None = None,
) -> None:
    for lang in trees:
        build_tree(tree_of(data, cache, lang, pages), cache / lang)
    import dense_build

    dense_build.DATA, dense_build.CACHE = data, beir_cache
    for name in beir:
        if (beir_cache / name / "DONE").exists():
            continue
        dense_build.build(name)
        (beir_cache / name / "DONE").write_text(time.strftime("%Y-%m-%dT%H:%M:%S") + "\n")


# -- scoring ----------------------------------------------------------------
class QueryVectors:
    """The retriever's query-vector cache, kept on disk between runs (same model key).

    Scoring a mode re-embeds every query otherwise; with it a re-run after a
    ranking change costs the ranking, not the model.
    """

    def __init__(self, path: Path) -> None:
        import pickle

        self.path, self.dirty = path, False
        self.data: dict[Any, Any] = pickle.loads(path.read_bytes()) if path.exists() else {}

    def get(self, key: Any) -> Any:
        return self.data.get(key)

    def put(self, key: Any, value: Any) -> None:
        self.data[key], self.dirty = value, True

    def save(self) -> None:
        import pickle

        if self.dirty:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_bytes(pickle.dumps(self.data))
            tmp.replace(self.path)
            self.dirty = False


def working_copy(src: Path, work: Path, fresh: bool = False) -> Path:
    """A private copy of a cached KB to score on.

    Opening a KB with another tokenizer version re-tokenizes it in place; the
    shared cache must stay as it was built (other branches read it), so every
    run scores on its own copy, taken again when the cache is newer.
    """
    dst = work / src.name
    stamp = dst / "COPIED"
    if fresh or not stamp.exists() or stamp.stat().st_mtime < (src / "DONE").stat().st_mtime:
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.lock", "query-vectors.*"))
        stamp.write_text(time.strftime("%Y-%m-%dT%H:%M:%S") + "\n")
    return dst


def attach_vectors(kb: Any, cache: QueryVectors) -> None:
    from clawkb.retrieve.pipeline import retriever_for

    retriever_for(kb).qvec_cache = cache  # type: ignore[assignment]


#: What each column runs: ``hybrid`` is plain weighted RRF of the two channels
#: (the adaptive weights and the title channel off), ``auto`` the shipped default.
#: Stage budgets are lifted: on a busy machine a query embedding can overrun the
#: shipped 2 s and silently drop the dense channel, which would measure the load.
NO_BUDGETS = {"budget_lexical_ms": 600_000.0, "budget_dense_ms": 600_000.0}
MODE_OPTIONS: dict[str, dict[str, Any]] = {
    "lexical": {"mode": "lexical", **NO_BUDGETS},
    "dense": {"mode": "dense", **NO_BUDGETS},
    "hybrid": {"mode": "hybrid", "adaptive": False, "titles": False, **NO_BUDGETS},
    "auto": {**NO_BUDGETS},
}


def golden(data: Path) -> list[dict[str, str]]:
    with open(data / "esp-idf-docs" / "golden.tsv", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def rank_of(paths: list[str], want: str) -> int | None:
    for i, p in enumerate(paths, 1):
        p = p.replace("\\", "/")
        if p == want or p.endswith("/" + want):
            return i
    return None


def score_engdocs(
    cache: Path, work: Path, rows: list[dict[str, str]], modes: tuple[str, ...], fresh: bool
) -> dict[str, Any]:
    """{mode: {kind: {half: {"hit@3", "mrr", "n"}}}} plus per-query ranks."""
    from clawkb.kb import KnowledgeBase

    out: dict[str, Any] = {}
    ranks: dict[str, dict[str, int | None]] = {}
    kbs = {
        lang: KnowledgeBase.open(working_copy(cache / lang, work, fresh))
        for lang in TREES
        if (cache / lang / "DONE").exists()
    }
    rows = [r for r in rows if KIND_TREE[r["kind"]] in kbs]  # a tree still building: its kinds wait
    qv = QueryVectors(QVEC / "engdocs.pkl")
    for kb in kbs.values():
        attach_vectors(kb, qv)
    try:
        for mode in modes:
            acc: dict[str, dict[str, list[int | None]]] = {}
            abst: dict[str, dict[str, list[bool]]] = {}
            ranks[mode] = {}
            t = time.process_time()
            for r in rows:
                kb = kbs[KIND_TREE[r["kind"]]]
                res = kb.search(r["query"], limit=20, snippets=False, **MODE_OPTIONS[mode])
                # one rank per page: the first chunk of the expected file; an abstained
                # search is ranked on the passages it withheld (``nearest``): this table
                # measures the ranking, the abstain rate is counted beside it
                seen: list[str] = []
                abst.setdefault(r["kind"], {}).setdefault(half(r["query"]), []).append(
                    bool(res.abstained)
                )
                for h in res.hits or res.nearest:
                    if h.anchor.path not in seen:
                        seen.append(h.anchor.path)
                rk = rank_of(seen, r["expect"])
                ranks[mode][r["kind"] + "\t" + r["query"]] = rk
                for h in (half(r["query"]), "all"):
                    acc.setdefault(r["kind"], {}).setdefault(h, []).append(rk)
            out[mode] = {
                kind: {
                    h: {
                        "hit@3": round(sum(1 for x in v if x and x <= K) / len(v), 4),
                        "mrr": round(sum(1 / x for x in v if x) / len(v), 4),
                        "n": len(v),
                        "abstained": sum(abst.get(kind, {}).get(h, [])) if h != "all" else None,
                    }
                    for h, v in halves.items()
                }
                for kind, halves in acc.items()
            }
            out[mode]["cpu_ms_per_query"] = round(1000 * (time.process_time() - t) / len(rows), 2)
            log(f"engdocs {mode}: " + "  ".join(
                f"{k} {out[mode][k]['dev']['hit@3']:.3f}/{out[mode][k]['held']['hit@3']:.3f}"
                for k in KINDS if k in out[mode]))  # fmt: skip
    finally:
        qv.save()
        for kb in kbs.values():
            kb.close()
    return {"scores": out, "ranks": ranks}


def score_beir(
    beir_cache: Path,
    work: Path,
    data: Path,
    name: str,
    modes: tuple[str, ...],
    limit: int,
    fresh: bool,
) -> dict[str, Any]:
    from clawkb.evaluate.beir import load_beir
    from clawkb.evaluate.metrics import aggregate, score_query
    from clawkb.evaluate.runner import CHUNKS_PER_DOC
    from clawkb.kb import KnowledgeBase

    ds = load_beir(data / name)
    queries = ds.queries[:limit] if limit else ds.queries
    out: dict[str, Any] = {}
    kb = KnowledgeBase.open(working_copy(beir_cache / name, work, fresh))
    qv = QueryVectors(QVEC / f"{name}.pkl")
    attach_vectors(kb, qv)
    try:
        for mode in modes:
            per: dict[str, list[dict[str, float]]] = {"dev": [], "held": [], "all": []}
            abst = {"dev": 0, "held": 0, "all": 0}
            for q in queries:
                # ranked on the passages an abstained search withheld too (as for esp-idf)
                res = kb.search(q.text, limit=10 * CHUNKS_PER_DOC, snippets=False,
                                **MODE_OPTIONS[mode])  # fmt: skip
                hits = sorted(res.hits or res.nearest, key=lambda hit: hit.rank)
                ranking = list(dict.fromkeys(hit.anchor.path for hit in hits))[:10]
                for h in (half(q.text), "all"):
                    per[h].append(score_query(ranking, q.qrels, (10,)))
                    abst[h] += bool(res.abstained)
            out[mode] = {
                h: {"ndcg@10": round(aggregate(v)["ndcg@10"], 4), "n": len(v), "abstained": abst[h]}
                for h, v in per.items()
            }
        log(f"{name}: " + "  ".join(
            f"{m} {out[m]['dev']['ndcg@10']:.4f}/{out[m]['held']['ndcg@10']:.4f}" for m in modes))  # fmt: skip
    finally:
        qv.save()
        kb.close()
    return out


# -- report -----------------------------------------------------------------
NOTES = ROOT / "results" / "engdocs-rules.md"


def render(runs: dict[str, Any]) -> str:
    md = [
        "# Relevance on engineering docs and the shared sets",
        "",
        "Produced by `bench/engdocs.py` (one command; see its docstring). hit@3 per kind of",
        "`esp-idf-docs/golden.tsv` (one rank per page), nDCG@10 per shared set. Each cell is",
        "`dev / held-out`: the two halves split by a stable hash of the query text. Rules were",
        "fitted on dev halves only.",
        "",
    ]
    for tag, run in runs.items():
        md += [f"## {tag}", "", f"{run.get('note', '')}", ""]
        eng = run.get("engdocs", {}).get("scores", {})
        if eng:
            md += ["| kind (hit@3) | " + " | ".join(MODES) + " |", "|---|" + "---:|" * len(MODES)]
            for kind in KINDS:
                cells = []
                for m in MODES:
                    s = eng.get(m, {}).get(kind)
                    cells.append(
                        f"{s['dev']['hit@3']:.3f} / {s['held']['hit@3']:.3f}" if s else "—"
                    )
                md.append(f"| {kind} | " + " | ".join(cells) + " |")
            md += ["", "| kind (MRR) | " + " | ".join(MODES) + " |", "|---|" + "---:|" * len(MODES)]
            for kind in KINDS:
                cells = []
                for m in MODES:
                    s = eng.get(m, {}).get(kind)
                    cells.append(f"{s['dev']['mrr']:.3f} / {s['held']['mrr']:.3f}" if s else "—")
                md.append(f"| {kind} | " + " | ".join(cells) + " |")
            any_mode = next(m for m in MODES if m in eng)
            md += ["", "Queries (dev / held-out): " + ", ".join(
                f"{k} {eng[any_mode][k]['dev']['n']} / {eng[any_mode][k]['held']['n']}"
                for k in KINDS if k in eng[any_mode])]  # fmt: skip
            if any(eng.get("auto", {}).get(k, {}).get("dev", {}).get("abstained") is not None
                   for k in KINDS):  # fmt: skip
                md += ["", "Abstained in auto (dev / held-out; ranked on the withheld passages): "
                       + ", ".join(f"{k} {eng['auto'][k]['dev']['abstained']} / "
                                   f"{eng['auto'][k]['held']['abstained']}"
                                   for k in KINDS if k in eng.get("auto", {}))]  # fmt: skip
            md += ["", "CPU ms per query: " + ", ".join(
                f"{m} {eng[m]['cpu_ms_per_query']}" for m in MODES if m in eng), ""]  # fmt: skip
        beir = run.get("beir", {})
        if beir:
            md += ["| set (nDCG@10) | " + " | ".join(MODES) + " |", "|---|" + "---:|" * len(MODES)]
            for name, r in beir.items():
                cells = [
                    f"{r[m]['dev']['ndcg@10']:.4f} / {r[m]['held']['ndcg@10']:.4f}"
                    if m in r
                    else "—"
                    for m in MODES
                ]
                md.append(f"| {name} | " + " | ".join(cells) + " |")
            md += ["", "Queries (dev / held-out): " + ", ".join(
                f"{n} {r[m]['dev']['n']} / {r[m]['held']['n']}"
                for n, r in beir.items() for m in list(r)[:1]), ""]  # fmt: skip
    if NOTES.exists():  # why each rule generalises (hand-written, kept beside the script)
        md += ["", NOTES.read_text(encoding="utf-8").rstrip()]
    return "\n".join(md) + "\n"


def main(argv: list[str]) -> None:
    global QVEC
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(ROOT / ".cache" / "engdocs"), help="esp-idf KBs")
    ap.add_argument("--beir-cache", default=None, help="shared-set KBs (default: CACHE/../beir)")
    ap.add_argument("--build-only", action="store_true", help="build the caches, score nothing")
    ap.add_argument("--no-engdocs", action="store_true", help="score the shared sets only")
    ap.add_argument("--no-build", action="store_true", help="score only what is cached")
    ap.add_argument("--rebuild", action="store_true", help="drop the esp-idf KBs first")
    ap.add_argument("--work", default=str(ROOT / ".cache" / "engdocs-work"),
                    help="private copies of the cached KBs that scoring opens")  # fmt: skip
    ap.add_argument("--qvec", default=str(QVEC), help="query vectors kept between runs")
    ap.add_argument("--fresh-copy", action="store_true", help="copy the cached KBs again")
    ap.add_argument("--sets", default=",".join(BEIR), help="shared sets (comma list, '' = none)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--pages", type=int, default=0,
                    help="index only this many golden pages per language (0 = all 490)")  # fmt: skip
    ap.add_argument("--trees", default=",".join(TREES), help="esp-idf trees to build (en,zh)")
    ap.add_argument(
        "--beir-queries", type=int, default=500, help="queries per shared set (0 = all)"
    )
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a retrieval setting for every mode (e.g. headings=false)")  # fmt: skip
    ap.add_argument("--tag", default="current", help="name of this run in the results")
    ap.add_argument("--note", default="", help="one line saying what this run measures")
    ap.add_argument("--out", default=str(ROOT / "results" / "engdocs"))
    add_datasets_flag(ap)
    args = ap.parse_args(argv)
    for kv in args.set:  # e.g. headings=false: the same table with one stage off
        key, _, raw = kv.partition("=")
        value: Any = {"true": True, "false": False}.get(raw.lower(), raw)
        for opts in MODE_OPTIONS.values():
            opts[key] = value
    data = datasets_dir(args.datasets)
    cache = Path(args.cache).resolve()
    beir_cache = Path(args.beir_cache).resolve() if args.beir_cache else cache.parent / "beir"
    pages = chosen_pages(data, args.pages)
    if pages is not None:
        cache = cache / f"pages{args.pages}"
    QVEC = Path(args.qvec).resolve()
    QVEC.mkdir(parents=True, exist_ok=True)
    work = Path(args.work).resolve()
    (work / "engdocs").mkdir(parents=True, exist_ok=True)
    (work / "beir").mkdir(parents=True, exist_ok=True)
    sets = [s for s in args.sets.split(",") if s]
    modes = tuple(m for m in args.modes.split(",") if m)
    sys.path.insert(0, str(ROOT))
    if args.rebuild:
        for lang in TREES:
            shutil.rmtree(cache / lang, ignore_errors=True)
    if not args.no_build:
        trees = [t for t in args.trees.split(",") if t]
        build_all(data, cache, beir_cache, sets, trees, pages)
    if args.build_only:
        return
    out = Path(args.out)
    old = (
        json.loads(out.with_suffix(".json").read_text())
        if out.with_suffix(".json").exists()
        else {}
    )
    run: dict[str, Any] = {"note": args.note, "when": time.strftime("%Y-%m-%d %H:%M")}
    if not args.no_engdocs and any((cache / lang / "DONE").exists() for lang in TREES):
        rows = [r for r in golden(data) if pages is None or r["expect"] in pages]
        work_eng = work / ("engdocs" if pages is None else f"engdocs-pages{args.pages}")
        work_eng.mkdir(parents=True, exist_ok=True)
        run["engdocs"] = score_engdocs(cache, work_eng, rows, modes, args.fresh_copy)
        run["pages"] = args.pages or 490
    run["beir"] = {
        n: score_beir(beir_cache, work / "beir", data, n, modes, args.beir_queries, args.fresh_copy)
        for n in sets
        if (beir_cache / n / "DONE").exists()
    }
    if out.with_suffix(".json").exists():  # read again: another run may have written meanwhile
        old = json.loads(out.with_suffix(".json").read_text())
    old[args.tag] = run
    out.with_suffix(".json").write_text(json.dumps(old, indent=1, ensure_ascii=False) + "\n")
    out.with_suffix(".md").write_text(render({t: r for t, r in old.items()}))
    log(f"wrote {out}.md")


if __name__ == "__main__":
    main(sys.argv[1:])
