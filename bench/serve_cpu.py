"""Server CPU per request of `clawkb serve`, per endpoint, for one or more code trees.

    .venv/bin/python bench/serve_cpu.py src                      # this tree
    .venv/bin/python bench/serve_cpu.py /path/to/main/src src    # before / after, same run

Builds the soak's KB (bench/soak.py: 180 generated files, lexical), starts one
`clawkb serve` per SRC (each with SRC first on PYTHONPATH), then runs rounds of
``N`` requests from ``CONC`` client threads against each server in turn,
interleaved (/healthz, /api/v1/search?q=WORD&limit=5, and the same searches
with writes: one API write round — 5 files rewritten, one deleted, one added,
``POST /api/v1/index``, ``POST /api/v1/memory``, as the soak's API writer — after
every ``EVERY`` searches), and prints the server's CPU time (user + system, all
threads, from /proc) per search: the median and every round. The writes are a
fixed number per search, not per second, so CPU per search with writes does not
depend on how fast a loaded machine lets the searches go. CPU time, not latency,
so a busy machine changes it little. Environment: ROUNDS (4), N (400), CONC (8),
EVERY (40), DENSE (1: embed the KB first with the static model, as the soak is after
its `embed`; default lexical), WORKERS (N > 1: `serve --workers N`; the CPU is then
the N workers' and their parent's, as the soak counts it).
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
ENDPOINTS = ("/healthz", "/api/v1/search", "/api/v1/search+writes")


def start(
    src: str, home: Path, corpus: Path, workers: int = 1
) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWKB_")}
    env["PYTHONPATH"] = str(Path(src).resolve())
    cmd = [CLAWKB, "--kb", str(home), "serve", str(corpus), "--port", "0"]
    if workers > 1:
        cmd += ["--workers", str(workers)]
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


class Writer:
    """The soak's API write round, on files of its own (``corpus/api``)."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.rng, self.rounds = folder, random.Random(11), 0
        self.alive = list(range(1000, 1010))
        for i in self.alive:
            soak.write_file(folder, i, 0, self.rng)
        self.next_new = 1010
        self.lock = threading.Lock()

    def round(self, http: httpx.Client) -> None:
        with self.lock:
            self.rounds += 1
            for i in self.rng.sample(range(1000, 1000 + 40), 5):
                soak.write_file(self.folder, i, self.rounds, self.rng)
            gone = self.alive.pop(self.rng.randrange(len(self.alive)))
            (self.folder / f"f{gone:05d}.md").unlink(missing_ok=True)
            soak.write_file(self.folder, self.next_new, 0, self.rng)
            self.alive.append(self.next_new)
            self.next_new += 1
            http.post("/api/v1/index", json={"path": str(self.folder)}).raise_for_status()
            note = {"text": f"soak note {self.rounds % 7}", "tags": ["soak"]}
            http.post("/api/v1/memory", json=note).raise_for_status()


def batch(
    url: str,
    path: str,
    n: int,
    conc: int,
    stable: int = 150,
    writer: Writer | None = None,
    every: int = 40,
) -> None:
    def client(k: int) -> None:
        rng = random.Random(k)
        with httpx.Client(base_url=url, timeout=120, trust_env=False) as http:
            for j in range(n // conc):
                params = {"q": soak.unique(rng.randrange(stable)), "limit": 5}
                r = http.get(path.split("+")[0], params=params if "search" in path else None)
                r.raise_for_status()
                if writer is not None and k == 0 and (j + 1) % max(1, every // conc) == 0:
                    writer.round(http)  # one write round per `every` searches of all clients

    threads = [threading.Thread(target=client, args=(k,)) for k in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main() -> None:
    srcs = sys.argv[1:] or ["src"]
    n, conc = int(os.environ.get("N", 400)), int(os.environ.get("CONC", 8))
    rounds = int(os.environ.get("ROUNDS", 4))
    every = int(os.environ.get("EVERY", 40))
    workers = int(os.environ.get("WORKERS", 1))
    with tempfile.TemporaryDirectory(prefix="clawkb-serve-cpu-") as tmp:
        work = Path(tmp)
        corpus = work / "corpus"
        soak.write_corpus(corpus)
        api = corpus / "api"
        api.mkdir()
        home, dense = soak._make_kb(work, corpus)
        if dense and os.environ.get("DENSE") == "1":  # the soak after `embed`: dense on
            subprocess.run([CLAWKB, "--kb", str(home), "embed"], check=True, capture_output=True)
        writer = Writer(api)
        servers = [start(s, home, corpus, workers) for s in srcs]
        per: dict[tuple[str, str], list[float]] = {(s, e): [] for s in srcs for e in ENDPOINTS}
        heap: dict[str, list[tuple[int, float]]] = {s: [] for s in srcs}
        try:
            for _, url in servers:  # warm-up
                batch(url, ENDPOINTS[1], 200, conc)
                batch(url, ENDPOINTS[0], 100, conc)
            serving = {p.pid: soak._server_pids(p.pid, workers) for p, _ in servers}
            for _ in range(rounds):
                for ep in ENDPOINTS:
                    for s, (p, url) in zip(srcs, servers, strict=True):
                        c0 = soak._servers_cpu_s(serving[p.pid])
                        batch(url, ep, n, conc, writer=writer if "+" in ep else None, every=every)
                        c1 = soak._servers_cpu_s(serving[p.pid])
                        per[(s, ep)].append(1000 * (c1 - c0) / n)
                        heap[s].append(
                            (writer.rounds, soak._servers_rss_kb(serving[p.pid], "RssAnon") / 1024)
                        )
        finally:
            for p, _ in servers:
                p.terminate()
                p.wait(20)
    for s, samples in heap.items():  # both servers see every write round (one KB)
        half = samples[len(samples) // 2 :]
        slope = soak.rss_slope([(float(r), mb) for r, mb in half], 0.0)
        per_100 = "-" if slope is None else f"{slope / 60 * 100:.2f}"
        print(
            f"{s}  server heap (RssAnon) over write rounds: {per_100} MB per 100 rounds"
            f" (second half); {[(r, round(mb, 1)) for r, mb in samples]}"
        )
    for (s, ep), values in per.items():
        v = sorted(values)
        print(
            f"{s}  {ep}  server CPU ms/request: median {v[len(v) // 2]:.2f}, rounds {[round(x, 2) for x in values]}"
        )


if __name__ == "__main__":
    main()
