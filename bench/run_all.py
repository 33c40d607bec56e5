"""Lexical benchmark: clawkb vs bm25s vs tantivy on one synthetic corpus, then quality.

    .venv/bin/python bench/run_all.py                      # 100k and 1M docs (make bench)
    BENCH_SIZES=20000 .venv/bin/python bench/run_all.py    # quick run
    .venv/bin/python bench/run_all.py --sizes 100000 --engines clawkb,bm25s --no-quality
    .venv/bin/python bench/run_all.py --old-src ../base/src ...   # + clawkb from another tree
    .venv/bin/python bench/run_all.py --old-ref main ...          # + clawkb at another commit

Each engine runs at each size in its own subprocess (bench/lexical.py), so peak
RSS is per engine.  Writes bench/results/lexical-<date>.json and
bench/results/latest.md.  See bench/README.md.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import importlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import report  # noqa: E402
import synth  # noqa: E402
from old_tree import old_src  # noqa: E402
from shared_data import add_datasets_flag, datasets_dir  # noqa: E402

ENGINES = ["clawkb", "bm25s-numba", "tantivy", "tantivy-own"]
DATASETS = datasets_dir()
WARMUP = 20
THREAD_ENV = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def environment() -> dict[str, Any]:
    cpu = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo", encoding="utf-8") as fh:
        mem_kib = int(fh.readline().split()[1])
    versions = {}
    for pkg in ("clawkb", "numpy", "bm25s", "numba", "tantivy"):
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = "missing"
    try:
        tok = importlib.import_module("clawkb.text.tokenize")
        versions["clawkb-tokenizer"] = str(getattr(tok, "TOKENIZER_VERSION", "?"))
    except ImportError:
        pass
    return {
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "mem_gib": mem_kib / 2**20,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "thread_env": THREAD_ENV,
    }


def ensure_corpus(n_docs: int, n_queries: int, seed: int) -> Path:
    """Generate (once) and cache the corpus and queries for one size."""
    folder = HERE / ".cache" / f"synth-v{synth.GENERATOR_VERSION}-{n_docs}-s{seed}-q{n_queries}"
    if (folder / "queries.jsonl").exists():
        return folder
    say(f"generating {n_docs:,} synthetic documents (seed {seed})")
    t0 = time.perf_counter()
    texts, queries = synth.generate(n_docs, n_queries=n_queries + WARMUP, seed=seed)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "docs.txt", "w", encoding="utf-8") as fh:
        for text in texts:
            fh.write(text.replace("\n", " ") + "\n")
    with open(folder / "queries.tmp", "w", encoding="utf-8") as fh:
        for q in queries:
            fh.write(json.dumps({"text": q.text, "doc": q.doc, "lang": q.lang}, ensure_ascii=False))
            fh.write("\n")
    (folder / "queries.tmp").rename(folder / "queries.jsonl")
    chars = sum(len(t) for t in texts)
    say(f"  done in {time.perf_counter() - t0:.0f} s ({chars / 1e6:.0f} M characters)")
    return folder


#: the engine name of clawkb run from another tree (--old-src), as a peer
OLD = "clawkb-old"
#: the older tree's lexical index alone (engine clawkb-index from --old-src), by request
OLD_INDEX = "clawkb-index-old"
#: what each old-tree engine runs as
OLD_ENGINES = {OLD: "clawkb", OLD_INDEX: "clawkb-index"}


def run_engine(
    engine: str, corpus: Path, k: int, timeout: float, old_src: Path | None = None
) -> dict[str, Any]:
    """Run bench/lexical.py in a child process, streaming its progress lines.

    ``clawkb-old`` is clawkb imported from ``old_src`` (another checkout's
    ``src`` with its native modules built), for before/after in one run.
    """
    out = corpus / f"result-{engine}.json"
    out.unlink(missing_ok=True)
    real = OLD_ENGINES.get(engine, engine)
    cmd = [sys.executable, str(HERE / "lexical.py"), "--engine", real, "--corpus", str(corpus)]
    cmd += ["--k", str(k), "--out", str(out)]
    env = {**os.environ, **THREAD_ENV}
    if engine in OLD_ENGINES:
        if old_src is None:
            raise SystemExit(f"engine {engine} needs --old-src")
        env["PYTHONPATH"] = str(old_src.resolve())
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    tail: collections.deque[str] = collections.deque(maxlen=15)
    assert proc.stderr is not None
    for line in proc.stderr:
        tail.append(line.rstrip())
        print(line, end="", file=sys.stderr, flush=True)
    rc = proc.wait()
    timed_out = not timer.is_alive() and rc != 0
    timer.cancel()
    if rc == 0 and out.exists():
        result = json.loads(out.read_text(encoding="utf-8"))
        result["engine"] = engine
        return result
    why = f"timed out after {timeout:.0f} s" if timed_out else f"exit {rc}"
    last = next((line for line in reversed(tail) if line.strip()), "")
    return {"engine": engine, "error": f"{why}: {last}", "stderr_tail": list(tail)}


def run_quality(limit: int | None) -> dict[str, Any]:
    try:
        from clawkb.evaluate.runner import evaluate_dataset
    except ImportError as exc:
        say(f"quality section skipped: {exc}")
        return {"skipped": f"clawkb.evaluate.runner not importable ({exc})"}
    if not DATASETS.is_dir():
        return {"skipped": f"{DATASETS} not found"}
    results: dict[str, Any] = {}
    for folder in sorted(p for p in DATASETS.iterdir() if (p / "corpus.jsonl").exists()):
        say(f"quality: {folder.name}")
        t0 = time.perf_counter()
        try:
            rep = evaluate_dataset(folder, limit_queries=limit)
            data = rep.to_dict() if hasattr(rep, "to_dict") else dict(rep)
            data.pop("queries", None)  # per-query rows are too large for the summary
            results[folder.name] = data
            say(f"  {data.get('metrics')} ({time.perf_counter() - t0:.0f} s)")
        except Exception as exc:
            say(f"  failed: {exc!r}")
            results[folder.name] = {"error": repr(exc)}
    return {"datasets": results, "limit_queries": limit}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="clawkb lexical benchmark")
    default_sizes = os.environ.get("BENCH_SIZES", "100000,1000000")
    ap.add_argument("--sizes", default=default_sizes, help="comma-separated corpus sizes")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--queries", type=int, default=1000, help="timed queries per run")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per engine run")
    ap.add_argument("--no-quality", action="store_true", help="skip the real-dataset section")
    ap.add_argument(
        "--quality-limit",
        type=int,
        default=int(os.environ["BENCH_QUALITY_LIMIT"])
        if "BENCH_QUALITY_LIMIT" in os.environ
        else None,
        help="first N judged queries per dataset (default: all)",
    )
    ap.add_argument("--out-dir", type=Path, default=HERE / "results")
    ap.add_argument(
        "--old-src",
        type=Path,
        help=f"another checkout's src/ (native modules built): adds engine {OLD}",
    )
    ap.add_argument(
        "--old-ref",
        help=f"a commit: its src is archived and built under bench/.cache and run as {OLD}"
        " (make bench passes the commit the issue-24 work started from)",
    )
    ap.add_argument(
        "--pdf", action="store_true", help="run only the PDF extraction benchmark (pdf_extract.py)"
    )
    add_datasets_flag(ap)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    global DATASETS
    args = parse_args(argv)
    DATASETS = datasets_dir(args.datasets)
    if args.pdf:
        import pdf_extract

        return pdf_extract.main(["--out-dir", str(args.out_dir)])
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    old_label = None
    if args.old_ref and not args.old_src:
        args.old_src, old_label = old_src(args.old_ref, native=True)
    if args.old_src and not any(e in OLD_ENGINES for e in engines):
        engines.insert(1, OLD)  # (name clawkb-index-old in --engines for the index alone)
    started = time.perf_counter()
    doc: dict[str, Any] = {
        "date": dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "environment": environment(),
        "sizes": sizes,
        "engines": engines,
        "old_tree": old_label or (str(args.old_src) if args.old_src else None),
        "seed": args.seed,
        "n_queries": args.queries,
        "warmup": WARMUP,
        "k": args.k,
        "lexical": {},
    }
    for size in sizes:
        corpus = ensure_corpus(size, args.queries, args.seed)
        rows = []
        for engine in engines:
            say(f"{engine} @ {size:,} docs")
            rows.append(run_engine(engine, corpus, args.k, args.timeout, args.old_src))
        doc["lexical"][str(size)] = rows
        write(doc, args.out_dir)  # keep partial results if a later size fails
    doc["quality"] = (
        {"skipped": "--no-quality"} if args.no_quality else run_quality(args.quality_limit)
    )
    doc["total_s"] = time.perf_counter() - started
    json_path, md_path = write(doc, args.out_dir)
    say(f"wrote {json_path} and {md_path} in {doc['total_s'] / 60:.1f} min")
    print(md_path.read_text(encoding="utf-8"))
    return 0


def write(doc: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / f"lexical-{doc['date'][:10]}.json"
    json_path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    md_path = out_dir / "latest.md"
    md_path.write_text(report.render(doc) + "\n", encoding="utf-8")
    return json_path, md_path


if __name__ == "__main__":
    raise SystemExit(main())
