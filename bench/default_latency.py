"""Default-mode search latency on a 5,000-chunk KB, in process (issue 19's latency target).

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python bench/default_latency.py \
        --kb DIR [--datasets DIR] [--queries 300] [--rounds 2] [--old-ref REF]

``--kb`` is an embedded KB (e5-small vectors), e.g. the agentset-msmarco KB
that ``bench/dense_build.py`` builds (5,000 passages). Queries mix what users
type: the set's own English questions, and the esp-idf-docs golden queries of
every kind (Chinese headings, English headings, identifiers, identifiers in a
Chinese question), so the glossary, the translated dense search, the
exact-match stage and the adaptive weights all run. The query-vector cache is
emptied before every timed search, so every timed search embeds its query.

Reported per mode (lexical, hybrid = plain RRF, default = what ``kb.search``
does with no options): wall p50 / p95 and CPU p50 (process CPU time: the
machine is shared, CPU time is what the code costs), and the default mode's
CPU p50 as a ratio of the lexical and hybrid CPU p50 measured in the same run,
and the query embedding alone (the model call), which bounds what the
ranking stages can save.
The result cache is off (``cache_size: 0`` in a private copy of the KB's
config) so nothing is served from memory, and the query tokenizer's word cache is
emptied at the start of every timed pass (words of earlier queries in the pass stay
known, as in a server; ``tools/query_embed.py`` times the embedding on its own). Writes
``bench/results/default-latency.json``.

``--synth N`` (issue 24's "default-mode p50 at 100k"): the KB is instead
``bench/synth.py``'s bilingual synthetic corpus of N documents, built once under
``bench/.cache/default-latency-synth-N``, with the synthetic queries. Embedding
100k chunks takes hours on two cores, so its vectors are ``--kb``'s real
e5-small vectors, each perturbed with Gaussian noise and renormalised, under the
real signature (as the former ``dense_latency.py`` did): the search work (matrix
size, the HNSW graph above ``ann_threshold``) is the real one and every query is
embedded by the real model inside the timed search.

``--old-ref REF`` (a commit, e.g. ``main``): this tree and that commit's tree
(:mod:`old_tree`, native kernels built) run in turn in fresh processes, one
round each per pass, ``--rounds`` passes, each on its own private copy of the
KB; the medians are written side by side with the new/old CPU ratios, and the
two trees' answers are compared query by query in every mode (the top-10 chunk
ids and whether the search abstained): ``rankings`` counts the identical ones
and lists the first differences. Speed work must leave it at 100 %.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from shared_data import add_datasets_flag, datasets_dir, private_copy, shown  # noqa: E402

MODES = {"lexical": {"mode": "lexical"}, "hybrid": {"mode": "hybrid", "adaptive": False},
         "default": {}}  # fmt: skip


def queries(data: Path, name: str, n: int) -> list[str]:
    """``n`` queries: half the set's own, half esp-idf-docs golden queries (every kind)."""
    from clawkb.evaluate.beir import load_beir

    own = [q.text for q in load_beir(data / name).queries]
    golden = data / "esp-idf-docs" / "golden.tsv"
    eng: list[str] = []
    if golden.exists():
        with open(golden, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
        by_kind: dict[str, list[str]] = {}
        for r in rows:
            by_kind.setdefault(r["kind"], []).append(r["query"])
        per = max(1, n // 2 // max(1, len(by_kind)))
        for kind in sorted(by_kind):
            eng += by_kind[kind][::7][:per]
    return own[: n - len(eng)] + eng


def synth_kb(n: int, vectors_from: Path) -> Path:
    """The synthetic ``n``-document KB with perturbed real vectors (built once)."""
    import time as _time

    from clawkb.embed.e5 import E5Small
    from clawkb.embed.vectors import SIGNATURE_KEY, model_key, stored_signature
    from clawkb.kb import KnowledgeBase, TextRecord
    from clawkb.store import db
    from synth import generate

    home = ROOT / ".cache" / f"default-latency-synth-{n}"
    if (home / "DONE").is_file():
        return home
    kb = KnowledgeBase.open(home, create=True)
    if kb.status()["chunks"] == 0:
        texts, _ = generate(n, 10)
        kb.index_texts(TextRecord(path=f"d{i}", text=t) for i, t in enumerate(texts))
    ids = [r[0] for r in kb.conn.execute("SELECT id FROM chunks ORDER BY id")]
    src = KnowledgeBase.open(vectors_from)
    sig = stored_signature(src.conn)  # the real e5-small signature of the real vectors
    assert sig is not None and sig["model"] == E5Small.name, f"{vectors_from}: no e5-small vectors"
    mkey = model_key(sig)
    real = np.stack(
        [np.frombuffer(v, "<f4") for (v,) in src.conn.execute("SELECT vec FROM vectors")]
    )
    src.close()
    rng = np.random.default_rng(7)
    kb.conn.execute("BEGIN")
    for start in range(0, len(ids), 5000):
        part = ids[start : start + 5000]
        base = real[rng.integers(0, len(real), len(part))]
        vecs = base + rng.normal(0, 0.02, base.shape).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        kb.conn.executemany(
            "INSERT OR REPLACE INTO vectors (model, key, vec) VALUES (?,?,?)",
            ((mkey, f"k{c}", v.astype("<f4").tobytes()) for c, v in zip(part, vecs, strict=True)),
        )
        kb.conn.executemany(
            "INSERT OR REPLACE INTO chunk_vectors (model, chunk_id, key) VALUES (?,?,?)",
            ((mkey, c, f"k{c}") for c in part),
        )
    db.set_meta(kb.conn, SIGNATURE_KEY, json.dumps(sig, sort_keys=True))
    db.set_meta(kb.conn, "dense_version", str(int(_time.time())))
    kb.conn.execute("COMMIT")
    kb.close()
    kb = KnowledgeBase.open(home)  # the dense copy and its HNSW graph, built once here
    kb.search("warm up", mode="hybrid", limit=10)
    kb.close()
    (home / "DONE").write_text("built\n")
    return home


def synth_queries(n: int, count: int) -> list[str]:
    from synth import generate

    return [q.text for q in generate(n, count)[1]]


def stats(wall: list[float], cpu: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(median(wall), 2),
        "p95_ms": round(float(np.percentile(wall, 95)), 2),
        "cpu_p50_ms": round(median(cpu), 2),
        "cpu_p95_ms": round(float(np.percentile(cpu, 95)), 2),
    }


def forget_words(kb) -> None:
    """Empty the query tokenizer's word cache: each round pays the misses of a process
    meeting these queries for the first time (words of earlier queries in the round
    stay known, as in a server)."""
    from clawkb.retrieve.pipeline import retriever_for

    tok = getattr(retriever_for(kb).embedder, "_query_tok", None)
    if tok is not None and hasattr(tok, "forget_words"):
        tok.forget_words()


def timed(kb, qs: list[str], opts: dict, answers: list | None = None) -> dict[str, float]:
    """Statistics of ``kb.search`` over ``qs``; ``answers`` gets each search's
    (top-10 chunk ids, abstained)."""
    from clawkb.retrieve.pipeline import retriever_for

    r = retriever_for(kb)
    forget_words(kb)
    wall, cpu = [], []
    for q in qs:
        r.qvec_cache.clear()  # every timed search embeds its query
        t, c = time.perf_counter(), time.process_time()
        res = kb.search(q, limit=10, snippets=False, **opts)
        wall.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
        if answers is not None:
            answers.append([[int(i) for i in res.chunk_ids], bool(res.abstained)])
    return stats(wall, cpu)


def embedding(kb, qs: list[str]) -> dict[str, float]:
    """The query embedding alone (the model call every dense search makes), same statistics."""
    from clawkb.retrieve.pipeline import retriever_for

    emb = retriever_for(kb).embedder
    forget_words(kb)
    wall, cpu = [], []
    for q in qs:
        t, c = time.perf_counter(), time.process_time()
        emb.embed_queries([q])
        wall.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
    return stats(wall, cpu)


def measure(src: Path, work: Path, qs: list[str], rounds: int) -> dict[str, object]:
    """Every mode ``rounds`` times (interleaved) on a private copy of ``src`` at ``work``."""
    from clawkb.kb import KnowledgeBase

    # a private copy: the config below must not touch the source
    work = private_copy(src, work)
    (work / "config.yaml").write_text("retrieval:\n  cache_size: 0\n")
    kb = KnowledgeBase.open(work)
    answers: dict[str, list] = {m: [] for m in MODES}
    try:
        chunks = kb.status()["chunks"]
        for opts in MODES.values():  # model, vectors and index loaded outside the timing
            kb.search("warm up the model", limit=10, **opts)
        runs: dict[str, list[dict[str, float]]] = {m: [] for m in [*MODES, "query_embedding"]}
        for i in range(rounds):  # modes interleaved, so load changes hit all alike
            for m, opts in MODES.items():
                runs[m].append(timed(kb, qs, opts, answers[m] if i == 0 else None))
            runs["query_embedding"].append(embedding(kb, qs))
    finally:
        kb.close()
    out: dict[str, object] = {"chunks": chunks}
    for m, rs in runs.items():  # median over rounds of each statistic
        out[m] = {k: round(median(r[k] for r in rs), 2) for k in rs[0]}
    out["answers"] = answers
    return out


def ratios(out: dict) -> None:
    d = out["default"]
    out["default_cpu_vs_lexical"] = round(d["cpu_p50_ms"] / out["lexical"]["cpu_p50_ms"], 2)
    out["default_cpu_vs_hybrid"] = round(d["cpu_p50_ms"] / out["hybrid"]["cpu_p50_ms"], 2)


def same_answers(qs: list[str], new: dict, old: dict) -> dict[str, object]:
    """Per mode: how many queries got the same top-10 ids and abstain flag in both trees."""
    out: dict[str, object] = {}
    for m in MODES:
        a, b = new[m], old[m]
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        out[m] = {
            "queries": len(a),
            "identical": len(a) - len(diff),
            "first_differences": [{"query": qs[i], "new": a[i], "old": b[i]} for i in diff[:5]],
        }
    return out


def compare(args: argparse.Namespace, src: Path, qs: list[str]) -> dict[str, object]:
    """This tree and ``--old-ref`` in turn, in fresh processes, ``--rounds`` passes."""
    from old_tree import old_src
    from shared_data import THREAD_ENV

    old, label = old_src(args.old_ref, native=True)
    trees = {"new": ROOT.parent / "src", "old": old}
    work = Path(args.work).resolve()
    got: dict[str, list[dict]] = {"new": [], "old": []}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            env = {**os.environ, **THREAD_ENV, "PYTHONPATH": str(tree)}
            cmd = [sys.executable, __file__, "--kb", str(args.kb), "--child", "--rounds", "1",
                   "--work", str(work / name), "--queries", str(args.queries), "--set", args.set,
                   "--synth", str(args.synth)]  # fmt: skip
            if args.datasets:
                cmd += ["--datasets", args.datasets]
            run = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
            got[name].append(json.loads(run.stdout))
    out: dict[str, object] = {"old_tree": label}
    for name, rs in got.items():
        side: dict = {"chunks": rs[0]["chunks"]}
        for m in [*MODES, "query_embedding"]:
            side[m] = {k: round(median(r[m][k] for r in rs), 2) for k in rs[0][m]}
        ratios(side)
        out[name] = side
    for m in [*MODES, "query_embedding"]:
        n, o = out["new"][m], out["old"][m]  # type: ignore[index]
        out[f"{m}_cpu_p50_new_vs_old"] = round(n["cpu_p50_ms"] / o["cpu_p50_ms"], 3)
    out["rankings"] = same_answers(qs, got["new"][0]["answers"], got["old"][0]["answers"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", required=True, help="an embedded KB (e.g. agentset-msmarco's)")
    ap.add_argument("--set", default="agentset-msmarco", help="the shared set the KB holds")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2, help="passes over the queries per mode")
    ap.add_argument("--work", default=str(ROOT / ".cache" / "default-latency"))
    ap.add_argument("--out", default=str(ROOT / "results" / "default-latency.json"))
    ap.add_argument("--old-ref", help="also time this commit's tree, in turn (same run)")
    ap.add_argument("--synth", type=int, default=0, help="a synthetic KB of this many docs")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    add_datasets_flag(ap)
    args = ap.parse_args()
    src = Path(args.kb).resolve()
    if args.synth:
        src = synth_kb(args.synth, src)
        qs = synth_queries(args.synth, args.queries)
    else:
        qs = queries(datasets_dir(args.datasets), args.set, args.queries)
    head: dict[str, object] = {"kb": shown(src), "queries": len(qs), "rounds": args.rounds}
    if args.child:
        print(json.dumps(measure(src, Path(args.work).resolve(), qs, args.rounds)))
        return
    if args.old_ref:
        out = {**head, **compare(args, src, qs)}
    else:
        out = {**head, **measure(src, Path(args.work).resolve(), qs, args.rounds)}
        del out["answers"]
        ratios(out)
    out["loadavg_1m"] = round(os.getloadavg()[0], 1)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
