"""What one write costs the reader threads of a server process: renewing their views
and their first searches on the new data (issue 20), for one or more code trees.

    .venv/bin/python tools/view_renewal.py /path/to/main/src src   # before / after

Builds the soak's KB (bench/soak.py: 180 generated files; embedded with the
static model when it is installed, as the soak is after its ``embed``), then per
SRC, in a child process with SRC first on PYTHONPATH and a copy of that KB: a
server :class:`Runtime` with READERS reader threads; each round every thread
runs SEARCHES one-word queries (new ones every round, so none is answered from
the result cache; the same ones in every tree); between rounds either nothing happens
(quiet rounds) or the writer thread runs the soak's API write round (5 files
rewritten, one deleted, one added, ``index``; the new chunks embedded; a
memory note: three jobs). The figure is the reader threads' own CPU time (``thread_time``:
the writer's work is not in it) per round, quiet and after a write; the
difference is what one write costs the views of the process. Children are
run ALTERNATE times each, interleaved. Environment: ROUNDS (12), READERS (4),
SEARCHES (10), ALTERNATE (2), REPEAT (1: the same queries every round, as
`serve_cpu.py`'s clients repeat theirs: a view's result cache then answers the
quiet rounds, and a write, which starts every view on an empty one, costs
the searches themselves).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import bench_path  # bench/ on sys.path (and its path for the children)
import soak

HERE = bench_path.BENCH  # the soak's helpers, for the child processes too

CHILD = r"""
import json, random, sys, threading, time
from pathlib import Path
sys.path.insert(0, sys.argv[4])
import soak
from clawkb.server.runtime import Runtime

home, api = Path(sys.argv[1]), Path(sys.argv[2])
rounds, readers, searches, repeat = (int(x) for x in sys.argv[3].split(","))

def queries(r):
    # new words every round: none is answered from a result cache (ROUNDS x SEARCHES <= 150)
    r = 0 if repeat else r
    return [soak.unique(r * searches + j) for j in range(searches)]

runtime = Runtime(home, writer_process=False)
start = threading.Barrier(readers + 1)
done = threading.Barrier(readers + 1)
cpu = [0.0] * readers

def reader(k):
    for r in range(rounds):
        start.wait()
        t0 = time.thread_time()
        for q in queries(r):
            runtime.read_sync(lambda kb: kb.search(q, limit=5))
        cpu[k] = time.thread_time() - t0
        done.wait()

rng = random.Random(11)
alive, new = list(range(1000, 1010)), [1010]
for i in alive:
    soak.write_file(api, i, 0, rng)

def write(kb, r):
    for i in rng.sample(range(1000, 1040), 5):
        soak.write_file(api, i, r, rng)
    gone = alive.pop(rng.randrange(len(alive)))
    (api / f"f{gone:05d}.md").unlink(missing_ok=True)
    soak.write_file(api, new[0], 0, rng)
    alive.append(new[0]); new[0] += 1
    return kb.index([api])

def note(kb, r):
    kb.memory.store(f"soak note {r % 7}", tags=["soak"])

def embed(kb):
    from clawkb.embed.run import embed_new
    from clawkb.embed import vectors
    if vectors.stored_signature(kb.conn) is not None:
        embed_new(kb)

threads = [threading.Thread(target=reader, args=(k,)) for k in range(readers)]
for t in threads:
    t.start()
quiet, written = [], []
for r in range(rounds):
    wrote = r >= 2 and r % 2 == 0  # rounds 0-1 warm up; then a write before every other round
    if wrote:
        # three jobs, as the API's round (/index, then the embedding of its new chunks,
        # then /memory): each one moves the views' generation
        runtime.submit(lambda kb: write(kb, r), "index").result(300)
        runtime.submit(embed, "embed").result(300)
        runtime.submit(lambda kb: note(kb, r), "memory").result(300)
    start.wait()
    done.wait()
    if r >= 2:
        (written if wrote else quiet).append(1000 * sum(cpu))
for t in threads:
    t.join()
runtime.close()
print(json.dumps({"quiet": quiet, "written": written}))
"""


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n")[0],
        epilog="Environment: ROUNDS, READERS, SEARCHES, ALTERNATE, REPEAT (see the module text).",
    )
    ap.add_argument("srcs", nargs="*", default=["src"], help="code trees (their src folders)")
    srcs = ap.parse_args().srcs
    rounds = int(os.environ.get("ROUNDS", 12))
    readers = int(os.environ.get("READERS", 4))
    searches = int(os.environ.get("SEARCHES", 10))
    alternate = int(os.environ.get("ALTERNATE", 2))
    repeat = int(os.environ.get("REPEAT", 0))
    clawkb = str(Path(sys.executable).parent / "clawkb")
    results: dict[str, dict[str, list[float]]] = {s: {"quiet": [], "written": []} for s in srcs}
    with tempfile.TemporaryDirectory(prefix="clawkb-view-renewal-") as tmp:
        work = Path(tmp)
        corpus = work / "corpus"
        soak.write_corpus(corpus)
        (corpus / "api").mkdir()
        home, dense = soak._make_kb(work, corpus)
        if dense:
            subprocess.run([clawkb, "--kb", str(home), "embed"], check=True, capture_output=True)
        for n in range(alternate):
            for s in srcs:
                run = work / f"run-{n}-{len(results[s]['quiet'])}-{srcs.index(s)}"
                shutil.copytree(corpus, run / "corpus")
                shutil.copytree(home, run / "kb")
                env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWKB_")}
                env["PYTHONPATH"] = str(Path(s).resolve())
                args = [str(run / "kb"), str(run / "corpus" / "api")]
                args += [f"{rounds},{readers},{searches},{repeat}", str(HERE)]
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, *args],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                got = json.loads(out.strip().splitlines()[-1])
                for key in ("quiet", "written"):
                    results[s][key] += got[key]
    same = "the same queries every round" if repeat else "new queries every round"
    print(f"dense: {dense}; {readers} reader threads x {searches} searches a round, {same}")
    for s, got in results.items():
        q, w = sorted(got["quiet"]), sorted(got["written"])
        mq, mw = q[len(q) // 2], w[len(w) // 2]
        print(
            f"{s}: reader CPU per round, median: quiet {mq:.1f} ms, after a write {mw:.1f} ms;"
            f" one write costs the views {mw - mq:.1f} ms"
            f" (quiet {[round(x, 1) for x in got['quiet']]}; written {[round(x, 1) for x in got['written']]})"
        )


if __name__ == "__main__":
    main()
