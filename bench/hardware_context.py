"""Hardware mode targets on examples/datasheets: `clawkb context` wall time and the golden set.

Runs the real command line in a fresh subprocess each time (interpreter start,
imports, opening the KB, search, formatting), as an agent would call it, and
reports median / p90 / max wall time against the 0.5 s target, next to the
floor every Python process with numpy pays here (a bare ``import numpy``) and
the load average, since the shared machines can be busy. Then scores
examples/hardware-golden.yaml: hit@3 with and without ``--board`` and the
alias block accuracy.

    .venv/bin/python bench/hardware_context.py [--runs 20] [--json OUT.json]
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

ROOT = Path(__file__).resolve().parent.parent
CLAWKB = str(Path(sys.executable).parent / "clawkb")
QUERIES = [
    ("turn on the red LED", ["nucleo-f401re"]),
    ("I2C1 的 SCL 接哪个脚", ["nucleo-f401re"]),
    ("what is the reset value of GPIOA_MODER", ["nucleo-f401re"]),
    ("打开红色LED", ["esp32-devkitc", "rpi-pico"]),
]


def time_context(home: str, runs: int) -> list[float]:
    times = []
    for i in range(runs):
        query, boards = QUERIES[i % len(QUERIES)]
        args = [CLAWKB, "--kb", home, "context", query, "--limit", "5"]
        for b in boards:
            args += ["--board", b]
        t0 = time.perf_counter()
        proc = subprocess.run(args, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0 or "[Hardware documentation]" not in proc.stdout:
            sys.exit(f"clawkb context failed for {query!r}: {proc.stderr or proc.stdout}")
    return times


def floor(runs: int) -> list[float]:
    """Wall time of a bare ``python -c "import numpy"``: what any clawkb process pays first."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import numpy"], check=True)
        times.append(time.perf_counter() - t0)
    return times


def golden(home: str) -> dict[str, float]:
    from clawkb.hardware.golden import check_hardware_golden
    from clawkb.kb import KnowledgeBase

    path = ROOT / "examples" / "hardware-golden.yaml"
    with KnowledgeBase.open(home) as kb:
        with_board = check_hardware_golden(kb, path)
        plain = yaml_without_boards(path)
        without = check_hardware_golden(kb, plain)
    return {
        "queries": with_board["total"],
        "hit@3 with --board": with_board["hit_at_k"],
        "hit@3 without --board": without["hit_at_k"],
        "alias block accuracy": with_board["alias_accuracy"],
    }


def yaml_without_boards(path: Path) -> Path:
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    for q in data["queries"]:
        q.pop("board", None)
        q.pop("expect_aliases", None)
    out = Path(tempfile.mkdtemp()) / "golden-no-board.yaml"
    out.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = str(Path(tmp) / "kb")
        subprocess.run(
            [
                CLAWKB,
                "--kb",
                home,
                "index",
                "-q",
                "--datasheets",
                str(ROOT / "examples" / "datasheets"),
            ],
            check=True,
            capture_output=True,
        )
        times = time_context(home, args.runs)
        base = floor(max(5, args.runs // 2))
        quality = golden(home)
    ordered = sorted(times)
    result = {
        "runs": len(times),
        "median_s": round(statistics.median(times), 4),
        "p90_s": round(ordered[max(0, int(0.9 * len(ordered)) - 1)], 4),
        "max_s": round(ordered[-1], 4),
        "target_s": 0.5,
        "floor_import_numpy_median_s": round(statistics.median(base), 4),
        "load_average_1min": round(os.getloadavg()[0], 2),
        **{k: round(v, 4) for k, v in quality.items()},
    }
    print("| metric | value |\n|---|---|")
    for k, v in result.items():
        print(f"| {k} | {v} |")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2), encoding="utf-8")
    if result["median_s"] > 0.5:
        sys.exit("median `clawkb context` wall time is above the 0.5 s target")


if __name__ == "__main__":
    main()
