"""Soak: many readers, one writer, `embed` and `memory store`, all at once, for minutes.

    .venv/bin/python bench/soak.py                   # 600 s (make bench)
    .venv/bin/python bench/soak.py --seconds 60      # quick run

Builds a throw-away KB from a generated bilingual-free corpus in a temp folder:
``stable`` files always exist (the writer rewrites their text, keeping one
unique word each), ``churn`` files are deleted and added. Reader processes
search the unique word of a random stable file and count a search as
*empty-for-existing* when that file is not among the hits. Meanwhile one
writer process re-indexes changed files in a loop (a full ``reindex`` every
few rounds), one process runs ``clawkb embed`` in a loop (the ``static``
embedder, when installed) and one stores memories.

Reports searches done, errors, empty-for-existing, latency percentiles and
what the writers did; writes bench/results/soak-latest.md. Targets: 0 errors,
0 empty-for-existing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CLAWKB = str(Path(sys.executable).parent / "clawkb")
WORDS = [f"w{i}" for i in range(2000)]


def unique(i: int) -> str:
    return f"soakword{i:05d}z"


def write_file(folder: Path, i: int, version: int, rng: random.Random) -> None:
    paras = []
    for p in range(5):
        words = rng.choices(WORDS, k=70)
        if p == 1:
            words.append(unique(i))
        paras.append(" ".join(words) + f" rev{version}")
    (folder / f"f{i:05d}.md").write_text(
        f"# File {i}\n\n" + "\n\n".join(paras) + "\n", encoding="utf-8"
    )


# -- roles (each runs in its own process) -----------------------------------
def reader(home: str, stable: int, until: float) -> dict[str, Any]:
    from clawkb.kb import KnowledgeBase

    rng = random.Random(os.getpid())
    lat: list[float] = []
    errors = empty = 0
    first_error = ""
    with KnowledgeBase.open(home) as kb:
        while time.time() < until:
            i = rng.randrange(stable)
            t0 = time.perf_counter()
            try:
                res = kb.search(unique(i), limit=5)
            except Exception as exc:  # counted and reported
                errors += 1
                first_error = first_error or f"{type(exc).__name__}: {exc}"
                continue
            lat.append((time.perf_counter() - t0) * 1000)
            if not any(h.anchor.path.endswith(f"f{i:05d}.md") for h in res.hits):
                empty += 1
    return {"latencies": lat, "errors": errors, "empty": empty, "first_error": first_error}


def writer(home: str, folder: str, stable: int, churn: int, until: float) -> dict[str, Any]:
    from clawkb.kb import KnowledgeBase

    rng = random.Random(1)
    root = Path(folder)
    rounds = reindexes = failures = 0
    next_new = stable + churn
    alive = list(range(stable, stable + churn))
    first_error = ""
    with KnowledgeBase.open(home) as kb:
        while time.time() < until:
            rounds += 1
            for i in rng.sample(range(stable), min(10, stable)):
                write_file(root, i, rounds, rng)
            for i in rng.sample(alive, min(3, len(alive))):
                (root / f"f{i:05d}.md").unlink()
                alive.remove(i)
            for _ in range(3):
                write_file(root, next_new, 0, rng)
                alive.append(next_new)
                next_new += 1
            try:
                kb.index([root], wait=120)
                if rounds % 5 == 0:
                    kb.reindex()
                    reindexes += 1
            except Exception as exc:
                failures += 1
                first_error = first_error or f"{type(exc).__name__}: {exc}"
    return {
        "rounds": rounds,
        "reindexes": reindexes,
        "failures": failures,
        "first_error": first_error,
    }


def looper(cmd: list[str], until: float, pause: float) -> dict[str, Any]:
    ok = failed = 0
    first_error = ""
    while time.time() < until:
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if out.returncode == 0:
            ok += 1
        else:
            failed += 1
            first_error = first_error or out.stderr.strip()[-300:]
        time.sleep(pause)
    return {"ok": ok, "failed": failed, "first_error": first_error}


def _role_main(argv: list[str]) -> None:
    role, args = argv[0], json.loads(argv[1])
    fn = {"reader": reader, "writer": writer, "looper": looper}[role]
    print(json.dumps(fn(**args)))


# -- orchestration ----------------------------------------------------------
def _spawn(role: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, "--role", role, json.dumps(kwargs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _collect(proc: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        return {"crashed": True, "stderr": err.strip()[-500:]}
    return json.loads(out.strip().splitlines()[-1])


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def run(seconds: float, readers: int, stable: int, churn: int, work: Path) -> dict[str, Any]:
    from clawkb.kb import KnowledgeBase

    folder = work / "corpus"
    folder.mkdir()
    rng = random.Random(7)
    for i in range(stable + churn):
        write_file(folder, i, 0, rng)
    home = work / "kb"
    home.mkdir()
    try:
        import static_model  # noqa: F401

        dense = True
        (home / "config.yaml").write_text("embedding: static\n", "utf-8")
    except ImportError:
        dense = False
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([folder])
    if dense:
        subprocess.run([CLAWKB, "--kb", str(home), "embed"], check=True, capture_output=True)
    start = time.time() + 3.0  # let every process import before the clock starts
    until = start + seconds
    procs = {
        f"reader{k}": _spawn("reader", home=str(home), stable=stable, until=until)
        for k in range(readers)
    }
    procs["writer"] = _spawn(
        "writer", home=str(home), folder=str(folder), stable=stable, churn=churn, until=until
    )
    if dense:
        procs["embed"] = _spawn(
            "looper", cmd=[CLAWKB, "--kb", str(home), "embed"], until=until, pause=1.0
        )
    procs["memory"] = _spawn(
        "looper",
        cmd=[CLAWKB, "--kb", str(home), "memory", "store", "soak note", "--tag", "soak"],
        until=until,
        pause=0.5,
    )
    results = {name: _collect(p, seconds + 600) for name, p in procs.items()}
    lat: list[float] = []
    errors = empty = 0
    first_error = ""
    crashed = [n for n, r in results.items() if r.get("crashed")]
    for name, r in results.items():
        if name.startswith("reader") and not r.get("crashed"):
            lat += r["latencies"]
            errors += r["errors"]
            empty += r["empty"]
            first_error = first_error or r["first_error"]
    with KnowledgeBase.open(home) as kb:
        from clawkb.maintenance.doctor import run_doctor

        doctor = run_doctor(home)
        final = kb.repo.counts()
    return {
        "seconds": seconds,
        "readers": readers,
        "dense": dense,
        "searches": len(lat),
        "errors": errors,
        "empty_for_existing": empty,
        "first_error": first_error,
        "p50_ms": round(pct(lat, 0.50), 2),
        "p95_ms": round(pct(lat, 0.95), 2),
        "p99_ms": round(pct(lat, 0.99), 2),
        "writer": results["writer"],
        "embed": results.get("embed"),
        "memory": results["memory"],
        "crashed": crashed,
        "doctor_healthy": doctor.healthy,
        "doctor": [f.line() for f in doctor.findings],
        "final_documents": final["documents"],
        "final_chunks": final["chunks"],
    }


def report_md(r: dict[str, Any]) -> str:
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    w, e, m = r["writer"], r["embed"] or {}, r["memory"]
    lines = [
        "# Soak: readers + writer + embed + memory at once",
        "",
        f"Run {when}, `bench/soak.py --seconds {r['seconds']:g}` on {os.cpu_count()} cores;"
        f" dense {'on (static embedder)' if r['dense'] else 'off'};"
        f" 1-minute load average at the end {os.getloadavg()[0]:.1f}.",
        "",
        "| measure | value | target |",
        "|---|---|---|",
        f"| reader processes | {r['readers']} | |",
        f"| searches done | {r['searches']} | |",
        f"| errors | {r['errors']} | 0 |",
        f"| empty for an existing file | {r['empty_for_existing']} | 0 |",
        f"| latency p50 / p95 / p99 | {r['p50_ms']} / {r['p95_ms']} / {r['p99_ms']} ms | |",
        f"| writer rounds (re-index + delete/add) | {w.get('rounds')} ({w.get('failures')} failed) | 0 failed |",
        f"| full `reindex` runs | {w.get('reindexes')} | |",
        f"| `embed` runs ok / failed | {e.get('ok', '-')} / {e.get('failed', '-')} | 0 failed |",
        f"| `memory store` ok / failed | {m.get('ok')} / {m.get('failed')} | 0 failed |",
        f"| crashed processes | {', '.join(r['crashed']) or 'none'} | none |",
        f"| `clawkb doctor` afterwards | {'healthy' if r['doctor_healthy'] else 'PROBLEMS'} | healthy |",
        f"| final documents / chunks | {r['final_documents']} / {r['final_chunks']} | |",
    ]
    errs = [
        ("reader", r["first_error"]),
        ("writer", w.get("first_error")),
        ("embed", e.get("first_error")),
        ("memory", m.get("first_error")),
    ]
    errs = [(k, v) for k, v in errs if v]
    lines += ["", "`clawkb doctor` after the run:", "", "```", *r["doctor"], "```"]
    if errs:
        lines += ["", "First errors:", ""] + [f"- {k}: `{v}`" for k, v in errs]
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--role":
        _role_main(sys.argv[2:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", 600)))
    ap.add_argument("--readers", type=int, default=8)
    ap.add_argument("--stable", type=int, default=150, help="files that always exist")
    ap.add_argument("--churn", type=int, default=30, help="files deleted and added")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "soak-latest.md")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="clawkb-soak-") as tmp:
        r = run(args.seconds, args.readers, args.stable, args.churn, Path(tmp))
    md = report_md(r)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(md, encoding="utf-8")
    print(md)
    ok = (
        r["errors"] == 0
        and r["empty_for_existing"] == 0
        and not r["crashed"]
        and r["doctor_healthy"]
        and not r["writer"].get("failures")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
