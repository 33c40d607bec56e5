"""Cold ``clawkb search``: hybrid against lexical, fresh processes, same run.

    .venv/bin/python bench/dense_cold.py [--runs 8] [--old-src DIR]

Indexes and embeds ``examples/`` into a throw-away KB (model cache warm after
the first search), then starts ``clawkb search`` in a fresh process per query,
``--mode lexical`` and ``--mode hybrid`` in turn (and hybrid from ``--old-src``,
a source tree of an older commit, e.g. ``git archive 65c3cd7 src | tar -x -C
DIR``), so the machine's load drifts evenly over all of them. Reported per
mode: median and best wall seconds, median CPU seconds (user + system of the
child) and peak RSS, from ``os.wait4``. The issue's target: hybrid <= 0.3 s
wall. Writes ``bench/results/dense-cold.json``.

Every tree runs with its bytecode cached (``PYTHONPYCACHEPREFIX`` in the
throw-away folder, written by the warm-up runs) as an installed package has:
with ``PYTHONDONTWRITEBYTECODE`` set (the Makefile sets it) an edited source
tree would otherwise recompile its changed modules in every timed process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ["串口没有输出怎么办", "DDR 走线阻抗", "CONFIG_SMP", "user LED pin", "SPI 时钟频率"]


def child_env(src: Path, pycache: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(src), PYTHONPYCACHEPREFIX=str(pycache))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def timed(src: Path, kb: Path, mode: str, query: str) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of one fresh ``clawkb search`` process."""
    env = child_env(src, kb.parent / "pycache")
    cmd = [sys.executable, "-m", "clawkb.cli.main", "--kb", str(kb), "search", "--mode", mode]
    t = time.perf_counter()
    proc = subprocess.Popen(
        [*cmd, query], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} {query!r}: exit {proc.returncode}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--old-src", type=Path, help="source tree of an older commit")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        kb = Path(tmp) / "kb"
        env = child_env(ROOT / "src", kb.parent / "pycache")
        base = [sys.executable, "-m", "clawkb.cli.main", "--kb", str(kb)]
        for step in (["index", str(ROOT / "examples"), "-q"], ["embed"]):
            subprocess.run([*base, *step], env=env, check=True, capture_output=True)
        modes = {"lexical": (ROOT / "src", "lexical"), "hybrid": (ROOT / "src", "hybrid")}
        if args.old_src:
            modes["hybrid (old tree)"] = (args.old_src, "hybrid")
        for src, mode in modes.values():  # caches (graph, piece table) and page cache warm
            timed(src, kb, mode, "warm up")
        runs: dict[str, list[tuple[float, float, float]]] = {m: [] for m in modes}
        for i in range(args.runs):
            for name, (src, mode) in modes.items():
                runs[name].append(timed(src, kb, mode, QUERIES[i % len(QUERIES)]))
    out: dict = {"runs": args.runs, "loadavg_1m": os.getloadavg()[0], "modes": {}}
    for name, rs in runs.items():
        out["modes"][name] = {
            "wall_s_median": round(statistics.median(r[0] for r in rs), 3),
            "wall_s_best": round(min(r[0] for r in rs), 3),
            "cpu_s_median": round(statistics.median(r[1] for r in rs), 3),
            "peak_rss_mb": round(max(r[2] for r in rs), 1),
        }
    lex = out["modes"]["lexical"]
    for m in out["modes"].values():
        m["cpu_over_lexical"] = round(m["cpu_s_median"] / lex["cpu_s_median"], 2)
    print(json.dumps(out, indent=2))
    (ROOT / "bench" / "results" / "dense-cold.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
