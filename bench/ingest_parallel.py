"""Build time of the lexical KB: clawkb with 1 and 2 ingest workers vs bm25s-numba.

Same session, one child process per build (so CPU and peak RSS belong to that
build alone), on the synthetic corpus of ``bench/lexical.py`` (``synth.py``,
seed 13) and on the bundled examples. Reports wall and CPU seconds (the
process and every worker it started) and ratios against bm25s-numba's build.
``--profile`` adds a cProfile of the indexing process per worker count.

    python bench/ingest_parallel.py --docs 100000 --out bench/results/ingest-parallel.json
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _cpu() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _profile_top(prof: Any, n: int = 14) -> list[dict[str, Any]]:
    import pstats

    st = pstats.Stats(prof)
    rows = []
    for (file, line, func), (_cc, nc, tt, ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        rows.append(
            {
                "function": f"{Path(file).name}:{line}({func})",
                "calls": nc,
                "tottime_s": tt,
                "cumtime_s": ct,
            }
        )
    rows.sort(key=lambda r: -r["tottime_s"])
    return rows[:n]


def child(engine: str, workers: int, corpus: str, profile: bool) -> dict[str, Any]:
    """Build once in this process; print a JSON line."""
    if engine == "clawkb-files":
        os.environ["CLAWKB_INGEST_WORKERS"] = str(workers)
        from clawkb.kb import KnowledgeBase

        home = tempfile.mkdtemp(prefix="bench-ingest-")
        kb = KnowledgeBase.open(home, create=True)
        c0 = _cpu()
        t0 = time.perf_counter()
        report = kb.index([corpus])
        wall = time.perf_counter() - t0
        n = report.added
        kb.close()
        shutil.rmtree(home, ignore_errors=True)
        prof = None
    else:
        with open(Path(corpus) / "docs.txt", encoding="utf-8") as fh:
            texts = fh.read().split("\n")
        if texts and texts[-1] == "":
            texts.pop()
        n = len(texts)
        if engine == "clawkb" and not os.environ.pop("CLAWKB_BASELINE", None):
            os.environ["CLAWKB_INGEST_WORKERS"] = str(workers)
        import peers

        eng = peers.make(engine)
        prof = None
        if profile:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        c0 = _cpu()
        t0 = time.perf_counter()
        eng.build(texts)
        wall = time.perf_counter() - t0
        if prof is not None:
            prof.disable()
        eng.close()
    c1 = _cpu()
    out: dict[str, Any] = {
        "engine": engine,
        "workers": workers,
        "docs": n,
        "wall_s": wall,
        "cpu_self_s": c1[0] - c0[0],
        "cpu_children_s": c1[1] - c0[1],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    out["cpu_s"] = out["cpu_self_s"] + out["cpu_children_s"]
    if prof is not None:
        out["profile_top"] = _profile_top(prof)
    return out


def run_child(
    engine: str, workers: int, corpus: Path, profile: bool, src: str | None = None
) -> dict[str, Any]:
    """One build in a fresh process; ``src``: import clawkb from that source tree
    instead (a baseline checkout, e.g. ``git archive <commit> src | tar -x``)."""
    cmd = [sys.executable, __file__, "--child", engine, "--workers", str(workers)]
    cmd += ["--corpus", str(corpus)] + (["--profile"] if profile else [])
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
        env["CLAWKB_BASELINE"] = "1"
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{engine} (workers {workers}) failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--rounds", type=int, default=1, help="repeat the whole set (interleaved)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--examples", type=Path, default=HERE.parent / "examples")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--baseline-src", help="also build with clawkb from this src folder (before)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--corpus", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.workers, args.corpus, args.profile)))
        return 0
    import run_all

    corpus = run_all.ensure_corpus(args.docs, 1000, args.seed)
    runs: list[dict[str, Any]] = []
    for r in range(args.rounds):
        sets: list[tuple[str, int, str | None]] = [("bm25s-numba", 1, None)]
        if args.baseline_src:
            sets.append(("clawkb", 0, args.baseline_src))
        sets += [("clawkb", 1, None), ("clawkb", 2, None)]
        for engine, workers, src in sets:
            res = run_child(engine, workers, corpus, args.profile and r == 0, src)
            res["round"] = r
            if src:
                res["engine"] = "clawkb-before"
            runs.append(res)
            print(
                f"[{time.strftime('%H:%M:%S')}] {engine} w{workers}: wall {res['wall_s']:.1f} s,"
                f" cpu {res['cpu_s']:.1f} s ({res['cpu_self_s']:.1f} self)",
                file=sys.stderr,
                flush=True,
            )
        for workers in (1, 2):
            res = run_child("clawkb-files", workers, args.examples, False)
            res["round"] = r
            runs.append(res)
            print(
                f"[{time.strftime('%H:%M:%S')}] examples w{workers}: wall {res['wall_s']:.2f} s,"
                f" cpu {res['cpu_s']:.2f} s",
                file=sys.stderr,
                flush=True,
            )
    text = json.dumps({"docs": args.docs, "seed": args.seed, "runs": runs}, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
