"""Server CPU per request of `clawkb serve`, per endpoint, for one or more code trees.

    .venv/bin/python bench/serve_cpu.py src                      # this tree
    .venv/bin/python bench/serve_cpu.py /path/to/main/src src    # before / after, same run

Builds the soak's KB (bench/soak.py: 180 generated files, lexical), starts one
`clawkb serve` per SRC (each with SRC first on PYTHONPATH), then runs rounds of
``N`` requests from ``CONC`` client threads against each server in turn,
interleaved (/healthz, then /api/v1/search?q=WORD&limit=5), and prints the
server's CPU time (user + system, all threads, from /proc) per request: the
median and every round. CPU time, not latency, so a busy machine changes it
little. Environment: ROUNDS (4), N (400), CONC (8).
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import soak  # noqa: E402

CLAWKB = str(Path(sys.executable).parent / "clawkb")
ENDPOINTS = ("/healthz", "/api/v1/search")


def start(src: str, home: Path, corpus: Path) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWKB_")}
    env["PYTHONPATH"] = str(Path(src).resolve())
    cmd = [CLAWKB, "--kb", str(home), "serve", str(corpus), "--port", "0"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert p.stdout is not None
    url = ""
    while not url:
        line = p.stdout.readline()
        if not line:
            raise SystemExit(f"clawkb serve ({src}) exited before it served")
        m = re.search(r"Serving on (http://\S+)", line)
        url = m.group(1) if m else ""
    threading.Thread(target=lambda: [None for _ in p.stdout or ()], daemon=True).start()
    return p, url


def batch(url: str, path: str, n: int, conc: int, stable: int = 150) -> None:
    def client(k: int) -> None:
        rng = random.Random(k)
        with httpx.Client(base_url=url, timeout=60, trust_env=False) as http:
            for _ in range(n // conc):
                params = {"q": soak.unique(rng.randrange(stable)), "limit": 5}
                r = http.get(path, params=params if "search" in path else None)
                r.raise_for_status()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main() -> None:
    srcs = sys.argv[1:] or ["src"]
    n, conc = int(os.environ.get("N", 400)), int(os.environ.get("CONC", 8))
    rounds = int(os.environ.get("ROUNDS", 4))
    with tempfile.TemporaryDirectory(prefix="clawkb-serve-cpu-") as tmp:
        work = Path(tmp)
        corpus = work / "corpus"
        corpus.mkdir()
        rng = random.Random(7)
        for i in range(180):
            soak.write_file(corpus, i, 0, rng)
        home, _ = soak._make_kb(work, corpus)
        servers = [start(s, home, corpus) for s in srcs]
        per: dict[tuple[str, str], list[float]] = {(s, e): [] for s in srcs for e in ENDPOINTS}
        try:
            for _, url in servers:  # warm-up
                batch(url, ENDPOINTS[1], 200, conc)
                batch(url, ENDPOINTS[0], 100, conc)
            for _ in range(rounds):
                for ep in ENDPOINTS:
                    for s, (p, url) in zip(srcs, servers, strict=True):
                        c0 = soak._cpu_s(p.pid)
                        batch(url, ep, n, conc)
                        per[(s, ep)].append(1000 * (soak._cpu_s(p.pid) - c0) / n)
        finally:
            for p, _ in servers:
                p.terminate()
                p.wait(20)
    for (s, ep), values in per.items():
        v = sorted(values)
        print(
            f"{s}  {ep}  server CPU ms/request: median {v[len(v) // 2]:.2f}, rounds {[round(x, 2) for x in values]}"
        )


if __name__ == "__main__":
    main()
