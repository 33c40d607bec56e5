"""CPU per search on a KB after many small writes, and a digest of the rankings.

    .venv/bin/python tools/segment_search.py build DIR [--rounds 60] [--dense]
    .venv/bin/python tools/segment_search.py run DIR [--reps 3]
    PYTHONPATH=/path/to/old/src .venv/bin/python tools/segment_search.py run DIR
    .venv/bin/python tools/segment_search.py lexical INDEX [--synth 100000] [--queries 1000]

``build`` makes the soak's KB (bench/soak.py: 180 generated files) in DIR and then
``--rounds`` small writes (5 of the first 120 files rewritten, ``index``), as the
soak's writers leave it; ``--dense`` embeds it with the static model first (then
searches are hybrid, as in the soak after its ``embed``). The tree that builds it
decides its segments (its merge policy).

``run`` opens the KB read-only-ish (a plain ``KnowledgeBase.open``) with the result
cache off and times ``kb.search(q, limit=5)`` over a fixed query set: the soak's
identifier-like words (the exact stage's anchors), plain word pairs and a few
questions (the not-found judge). It prints the lexical segments' live docs, the
CPU per search (``time.process_time``, min and median of ``--reps`` passes) and a
sha256 of every result's chunk ids, scores, order and abstain flag: two trees on
the same KB must print the same digest.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import bench_path  # noqa: F401  (bench/ on sys.path)
import soak

CLAWKB = str(Path(sys.executable).parent / "clawkb")


def queries() -> list[str]:
    rng = random.Random(3)
    out = [soak.unique(i) for i in range(0, 180, 2)]
    out += [f"{rng.choice(soak.WORDS)} {rng.choice(soak.WORDS)}" for _ in range(60)]
    out += [
        f"how does {rng.choice(soak.WORDS)} set {soak.unique(rng.randrange(180))}?"
        for _ in range(30)
    ]
    out += ["what is the boiling point of ethanol", "zzqx frobnicator 配置 阻抗"]
    return out


def build(home_dir: Path, rounds: int, dense: bool) -> None:
    from clawkb.kb import KnowledgeBase

    home_dir.mkdir(parents=True)
    corpus = home_dir / "corpus"
    corpus.mkdir()
    rng = random.Random(7)
    for i in range(180):
        soak.write_file(corpus, i, 0, rng)
    home, has_static = soak._make_kb(home_dir, corpus)
    if dense and has_static:
        subprocess.run([CLAWKB, "--kb", str(home), "embed"], check=True, capture_output=True)
    with KnowledgeBase.open(home) as kb:
        for r in range(1, rounds + 1):
            for i in rng.sample(range(120), 5):
                soak.write_file(corpus, i, r, rng)
            kb.index([corpus])
    config = home / "config.yaml"
    old = config.read_text("utf-8") if config.exists() else ""
    config.write_text(old + "retrieval:\n  cache_size: 0\n", "utf-8")


def run(home_dir: Path, reps: int) -> None:
    import clawkb
    from clawkb.kb import KnowledgeBase

    qs = queries()
    with KnowledgeBase.open(home_dir / "kb") as kb:
        segs = kb.lexical.segments
        print(f"tree {Path(clawkb.__file__).parent}")
        print(f"segments {len(segs)} {[s.n_live for s in segs]}")
        digest = hashlib.sha256()
        for q in qs:  # warm-up, and the digest
            res = kb.search(q, limit=5).to_dict()
            res.pop("took_ms")
            res["stages"] = [{k: v for k, v in st.items() if k != "ms"} for st in res["stages"]]
            digest.update(repr((q, sorted(res.items(), key=lambda kv: kv[0]))).encode())
        per = _cpu_ms_each(lambda q: kb.search(q, limit=5), qs, reps)
    print(
        f"CPU ms/search: min {min(per):.3f} median {statistics.median(per):.3f}"
        f" passes {[round(p, 3) for p in per]} ({len(qs)} queries)"
    )
    print(f"digest {digest.hexdigest()[:16]}")


def _cpu_ms_each(call: Callable[[Any], object], items: Sequence[Any], reps: int) -> list[float]:
    """Process CPU milliseconds per ``call(item)``, one figure per pass over ``items``."""
    per: list[float] = []
    for _ in range(reps):
        c0 = time.process_time()
        for item in items:
            call(item)
        per.append(1000 * (time.process_time() - c0) / len(items))
    return per


def lexical(folder: Path, n: int, count: int, reps: int) -> None:
    """The lexical stage alone on a big index (a copy: a reader writes its lease):
    ``LexicalIndex.search`` of the synthetic queries (bench/synth.py, as
    bench/default_latency.py asks them) and of each query's first token alone (the
    one-term path), CPU per query and a digest of ids, scores and match counts."""
    import clawkb
    from clawkb.index.lexical import LexicalIndex
    from clawkb.text.tokenize import tokenize
    from synth import generate

    toks = [tokenize(q.text) for q in generate(n, count)[1]]
    toks = [t for t in toks if t]
    sets = {"queries": toks, "one term": [t[:1] for t in toks]}
    idx = LexicalIndex(folder)
    print(f"tree {Path(clawkb.__file__).parent}")
    print(f"segments {len(idx.segments)} {[s.n_live for s in idx.segments]}")
    for name, qs in sets.items():
        digest = hashlib.sha256()
        for t in qs:
            ids, scores, matched = idx.search(t, k=10)
            digest.update(repr((ids.tolist(), scores.tolist(), matched)).encode())
        per = _cpu_ms_each(lambda t: idx.search(t, k=10), qs, reps)
        print(
            f"{name}: CPU ms/query min {min(per):.3f} median {statistics.median(per):.3f}"
            f" ({len(qs)} queries) digest {digest.hexdigest()[:16]}"
        )
    idx.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("dir", type=Path)
    b.add_argument("--rounds", type=int, default=60)
    b.add_argument("--dense", action="store_true")
    r = sub.add_parser("run")
    r.add_argument("dir", type=Path)
    r.add_argument("--reps", type=int, default=3)
    x = sub.add_parser("lexical")
    x.add_argument("dir", type=Path)
    x.add_argument("--synth", type=int, default=100_000)
    x.add_argument("--queries", type=int, default=1000)
    x.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    if a.cmd == "lexical":
        lexical(a.dir, a.synth, a.queries, a.reps)
    elif a.cmd == "build":
        build(a.dir, a.rounds, a.dense)
    else:
        run(a.dir, a.reps)


if __name__ == "__main__":
    main()
