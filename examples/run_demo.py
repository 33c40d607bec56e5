"""`make run`: index the bundled notes and run a few bilingual searches.

Uses a throw-away knowledge base in examples/.demo-kb so it never touches yours.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
KB = HERE / ".demo-kb"
CLAWKB = [sys.executable, "-m", "clawkb.cli.main", "--kb", str(KB)]
QUERIES = [
    "DDR 走线阻抗",
    "0x4002_3800",
    "串口没有输出怎么办",
    "I2C1_SCL",
    "CONFIG_SMP",
    "user LED pin on the Nucleo",
    "rkdeveloptool db",
]


def run(*args: str) -> None:
    print(f"\n$ clawkb {' '.join(args)}", flush=True)
    subprocess.run([*CLAWKB, *args], check=False)


def main() -> int:
    shutil.rmtree(KB, ignore_errors=True)
    run("index", str(HERE / "notes"))
    for q in QUERIES:
        run("search", q, "--limit", "2")
    run("check", str(HERE / "golden.yaml"))
    run("status")
    return 0


if __name__ == "__main__":
    sys.exit(main())
