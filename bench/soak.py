"""Soak: many readers, writers, `embed` and memory writes, all at once, for minutes.

    .venv/bin/python bench/soak.py                   # 600 s against `clawkb serve` (make bench)
    .venv/bin/python bench/soak.py --seconds 60      # quick run
    .venv/bin/python bench/soak.py --in-process      # the older soak, no server

The default (issue 20) runs `clawkb serve` with 8 HTTP reader clients, a writer
through the API (`/index`, `/memory`), a terminal `index` every 30 s and one
`embed` and one `reindex`, and samples the RSS of the server and of its children
(the embedding worker, the writer process)
(:func:`run_server`). Targets: 0 errors, 0 empty or wrong results, p99 <= 100
ms, RSS flat after warm-up. The older mode is described below.

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
import contextlib
import datetime as dt
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
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
    fn = {"reader": reader, "writer": writer, "looper": looper, "http_reader": http_reader}[role]
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


def write_corpus(folder: Path, files: int = 180, seed: int = 7) -> None:
    """The soak's generated files ``f00000.md`` .. in ``folder`` (made if missing): the
    KB that serve_cpu.py and the tools build to time a server on the soak's data."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    for i in range(files):
        write_file(folder, i, 0, rng)


def _make_kb(work: Path, corpus: Path) -> tuple[Path, bool]:
    """``work/kb`` with ``corpus`` indexed; set up for the static embedder when it is
    installed (then True: the soak runs dense)."""
    from clawkb.kb import KnowledgeBase

    home = work / "kb"
    home.mkdir()
    try:
        import static_model  # noqa: F401

        dense = True
        (home / "config.yaml").write_text("embedding: static\n", "utf-8")
    except ImportError:
        dense = False
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([corpus])
    return home, dense


def _merge_readers(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The reader processes' results added up (crashed ones left out): lists are
    concatenated, counts summed, the first non-empty message kept."""
    out: dict[str, Any] = {}
    for r in results.values():
        if r.get("crashed"):
            continue
        for key, value in r.items():
            if isinstance(value, list):
                out.setdefault(key, []).extend(value)
            elif isinstance(value, str):
                out[key] = out.get(key) or value
            else:
                out[key] = out.get(key, 0) + value
    for key in ("latencies", "server_ms"):
        out.setdefault(key, [])
    for key in ("errors", "empty", "wrong"):
        out.setdefault(key, 0)
    for key in ("first_error", "first_wrong"):
        out.setdefault(key, "")
    return out


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def percentiles(values: list[float], prefix: str = "") -> dict[str, float]:
    """``{prefix}p50_ms``, ``p95_ms`` and ``p99_ms`` of ``values`` (milliseconds)."""
    return {f"{prefix}p{q}_ms": round(pct(values, q / 100), 2) for q in (50, 95, 99)}


def run(seconds: float, readers: int, stable: int, churn: int, work: Path) -> dict[str, Any]:
    from clawkb.kb import KnowledgeBase

    folder = work / "corpus"
    folder.mkdir()
    rng = random.Random(7)
    for i in range(stable + churn):
        write_file(folder, i, 0, rng)
    home, dense = _make_kb(work, folder)
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
    readers_out = _merge_readers({n: r for n, r in results.items() if n.startswith("reader")})
    lat, errors, empty = readers_out["latencies"], readers_out["errors"], readers_out["empty"]
    first_error = readers_out["first_error"]
    crashed = [n for n, r in results.items() if r.get("crashed")]
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
        **percentiles(lat),
        "writer": results["writer"],
        "embed": results.get("embed"),
        "memory": results["memory"],
        "crashed": crashed,
        "doctor_healthy": doctor.healthy,
        "doctor": [f.line() for f in doctor.findings],
        "final_documents": final["documents"],
        "final_chunks": final["chunks"],
    }


# -- server soak (issue 20): `clawkb serve` under readers, writers and jobs ----------
class _PlainClient:
    """A keep-alive HTTP/1.1 client from the standard library: about a third of the
    CPU per request of httpx (1.0 vs 3.2-3.7 ms measured on this machine), so the
    load generator, which shares the server's cores, takes less from the server."""

    def __init__(self, url: str) -> None:
        import http.client
        import urllib.parse

        u = urllib.parse.urlsplit(url)
        self._make = lambda: http.client.HTTPConnection(
            u.hostname or "127.0.0.1", u.port, timeout=60
        )
        self._conn = self._make()
        self._quote = urllib.parse.urlencode

    def get(self, path: str, params: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        try:
            self._conn.request("GET", f"{path}?{self._quote(params)}")
            r = self._conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        except Exception:
            self._conn.close()
            self._conn = self._make()
            raise

    def close(self) -> None:
        self._conn.close()


class _HttpxClient:
    """The client of rounds 1-10 (``--client httpx``)."""

    def __init__(self, url: str) -> None:
        import httpx

        self._http = httpx.Client(base_url=url, timeout=60, trust_env=False)

    def get(self, path: str, params: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        r = self._http.get(path, params=params)
        return r.status_code, dict(r.headers), r.content

    def close(self) -> None:
        self._http.close()


def http_reader(
    url: str, stable: int, until: float, think: float, client: str = "plain"
) -> dict[str, Any]:
    """One reader client: search a stable file's unique word over HTTP until ``until``."""
    import resource

    rng = random.Random(os.getpid())
    lat: list[float] = []
    server_ms: list[float] = []
    done_at: list[float] = []
    answered_by: list[str] = []  # `serve --workers`: the worker of each answer
    errors = empty = wrong = 0
    first_error = first_wrong = ""
    http = _HttpxClient(url) if client == "httpx" else _PlainClient(url)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    while time.time() < until:
        i = rng.randrange(stable)
        t0 = time.perf_counter()
        try:
            status, headers, body = http.get("/api/v1/search", {"q": unique(i), "limit": 5})
        except Exception as exc:
            errors += 1
            first_error = first_error or f"{type(exc).__name__}: {exc}"
            continue
        lat.append((time.perf_counter() - t0) * 1000)
        done_at.append(time.time())
        if status != 200:
            errors += 1
            first_error = first_error or f"{status} {body[:300].decode('utf-8', 'replace')}"
            continue
        data = json.loads(body)
        answered_by.append(headers.get("x-clawkb-worker", "-"))
        server_ms.append(float(data.get("took_ms", 0.0)))
        paths = [h["path"] for h in data["hits"]]
        want = f"f{i:05d}.md"
        if not any(p.endswith(want) for p in paths):
            empty += 1
            first_wrong = first_wrong or f"{unique(i)} -> {paths[:3]}"
        elif not paths[0].endswith(want):
            wrong += 1
            first_wrong = first_wrong or f"{unique(i)} -> {paths[:3]} (not first)"
        if think:
            time.sleep(think)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    http.close()
    return {
        "latencies": lat,
        "server_ms": server_ms,
        "done_at": done_at,
        "answered_by": answered_by,
        "errors": errors,
        "empty": empty,
        "wrong": wrong,
        "first_error": first_error,
        "first_wrong": first_wrong,
        "client_cpu_s": r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime,
    }


def _rss_kb(pid: int, field: str = "VmRSS") -> int:
    """A process's resident memory in kB: ``VmRSS`` (all), ``RssAnon`` (its heap: what
    grows when it keeps objects) or ``RssFile`` (mapped files it touched: index
    segments, the dense vectors)."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


#: "Server RSS flat after warm-up" as a number: the server heap's (``RssAnon``)
#: least-squares slope over the second half of the run at most this, in MB/min
#: (1.5 MB over the last 5 minutes of a 600-s soak).
FLAT_MB_MIN = 0.3


def fit_slope(pts: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of ``(x, y)`` points; None with fewer than 3 or one x."""
    if len(pts) < 3:
        return None
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    var = sum((x - mx) ** 2 for x, _ in pts)
    if not var:
        return None
    return sum((x - mx) * (y - my) for x, y in pts) / var


def rss_slope(samples: list[tuple[float, float]], start: float) -> float | None:
    """Least-squares slope (MB per minute) of ``(seconds, MB)`` samples from ``start``
    seconds on; None with fewer than 3 samples there."""
    got = fit_slope([(t, mb) for t, mb in samples if t >= start])
    return None if got is None else round(60 * got, 2)


def per_round_kb(samples: list[tuple[float, float, int]], start: float) -> float | None:
    """Heap growth per write round (kB) from ``start`` seconds on: the slope of
    ``(seconds, MB, rounds done)`` samples' MB against rounds (the load decides how
    many rounds a run gets through; the heap grows with them, not with seconds)."""
    got = fit_slope([(float(n), mb * 1024) for t, mb, n in samples if t >= start])
    return None if got is None else round(got, 1)


def slope_start(seconds: float) -> float:
    """Where the RSS slope is measured from: minute 3 of a run of 5 minutes or more
    (after warm-up: the model loaded, caches filled by the first writes), else the
    second half."""
    return 180.0 if seconds >= 300 else seconds / 2


def _stats() -> dict[int, list[str]]:
    """Every process's ``/proc/PID/stat`` fields after the command name, by pid."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    out[int(entry)] = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
    return out


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and every live process below it: their own threads and their
    ended children (the parser sandboxes they waited for): the server, its workers
    (``--workers``), their embedding workers and writer processes."""
    stats = _stats()
    tree = {pid} | _below(pid, stats)
    ticks = sum(sum(int(f) for f in stats[p][11:15]) for p in tree if p in stats)
    return ticks / os.sysconf("SC_CLK_TCK")


def _below(pid: int, stats: dict[int, list[str]]) -> set[int]:
    out: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        kids = {c for c, fields in stats.items() if int(fields[1]) == p} - out
        out |= kids
        todo += list(kids)
    return out


def _server_pids(pid: int, workers: int) -> list[int]:
    """The processes that serve requests: the server, or under ``--workers N`` its N
    forked workers (its only children) and the parent that supervises them."""
    if workers <= 1:
        return [pid]
    kids = sorted(c for c, fields in _stats().items() if int(fields[1]) == pid)
    return [pid, *(c for c in kids if "writer_process" not in _cmdline(c))]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _servers_cpu_s(pids: list[int]) -> float:
    total = 0.0
    for p in pids:
        with contextlib.suppress(OSError):
            total += _cpu_s(p)
    return total


def _servers_rss_kb(pids: list[int], field: str = "VmRSS") -> int:
    total = 0
    for p in pids:
        with contextlib.suppress(OSError, ValueError):
            total += _rss_kb(p, field)
    return total


def _helpers_rss_kb(pids: list[int]) -> int:
    """RSS of the serving processes' own children (embedding workers, writer processes)."""
    stats = _stats()
    total = 0
    for child, fields in stats.items():
        if int(fields[1]) in pids and child not in pids:
            with contextlib.suppress(OSError, ValueError):
                total += _rss_kb(child)
    return total


def _rss_by_process(pids: list[int]) -> list[tuple[str, float]]:
    """(what, MB) for each serving process and each of its children, at this moment."""
    stats = _stats()
    out = []
    for p in pids:
        for q in [p, *sorted(c for c, f in stats.items() if int(f[1]) == p and c not in pids)]:
            with contextlib.suppress(OSError, ValueError):
                cmd = _cmdline(q)
                what = "server" if q == pids[0] else ("worker" if q in pids else _role(cmd))
                out.append((f"{what} {q} (of {p})" if q != p else f"{what} {q}",
                            round(_rss_kb(q) / 1024, 1)))  # fmt: skip
    return out


def _role(cmd: str) -> str:
    if "writer_process" in cmd:
        return "shared writer process"
    if "resource_tracker" in cmd:
        return "multiprocessing resource tracker"
    if "multiprocessing" in cmd or "spawn_main" in cmd:
        return "writer process"
    if "embed" in cmd:
        return "embedding worker"
    return "child"


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system, all threads) a process has used so far."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _profile(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes] | None:
    """Sample the server with py-spy (when installed) for ``seconds``: collapsed stacks
    per thread into ``out`` (one line per stack, its sample count last)."""
    spy = Path(sys.executable).parent / "py-spy"
    if not spy.exists():
        print("py-spy is not installed in this environment: no profile", file=sys.stderr)
        return None
    cmd = [str(spy), "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "97"]
    cmd += ["--format", "raw", "--threads", "--nonblocking", "--output", str(out)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_server(
    seconds: float,
    readers: int,
    stable: int,
    churn: int,
    work: Path,
    think: float,
    profile: Path | None = None,
    quiet: float = 0.0,
    trace: Path | None = None,
    server_workers: int = 1,
    client: str = "plain",
) -> dict[str, Any]:
    """The issue-20 soak: ``serve`` with ``readers`` HTTP clients, a writer through the
    API (``/index``, ``/memory``), a terminal ``index`` every 30 s, one ``embed`` and
    one ``reindex``; server RSS sampled every 5 s. The first ``quiet`` seconds have
    the readers alone (the server's CPU per search without writes). ``trace``: run the
    server under tracemalloc (bench/soak_trace.py) and take snapshots into that folder
    at 120 s (half-way in runs under 240 s) and at the end."""

    import httpx

    from clawkb.kb import KnowledgeBase

    corpus = work / "corpus"
    api_dir, term_dir = corpus / "api", corpus / "term"
    api_dir.mkdir(parents=True)
    term_dir.mkdir()
    rng = random.Random(7)
    split = stable * 2 // 3  # stable files 0..split-1 are the API writer's, the rest the terminal's
    for i in range(stable + churn):
        write_file(api_dir if i < split or i >= stable else term_dir, i, 0, rng)
    home, dense = _make_kb(work, corpus)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWKB_")}
    serve = ["--kb", str(home), "serve", str(corpus), "--port", "0"]
    if server_workers > 1:
        serve += ["--workers", str(server_workers)]
    if trace is not None:
        hook = [sys.executable, str(HERE / "soak_trace.py"), "serve-traced", str(trace), "--"]
    server = subprocess.Popen(
        [*hook, *serve] if trace is not None else [CLAWKB, *serve],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert server.stdout is not None
    url = ""
    while not url:
        line = server.stdout.readline()
        if not line:
            raise SystemExit("clawkb serve exited before it served")
        m = re.search(r"Serving on (http://\S+)", line)
        url = m.group(1) if m else ""
    import threading

    server_lines: list[str] = []
    threading.Thread(target=lambda: server_lines.extend(server.stdout or ()), daemon=True).start()
    start = time.time() + 3.0
    until = start + seconds
    procs = {
        f"reader{k}": _spawn(
            "http_reader", url=url, stable=stable, until=until, think=think, client=client
        )
        for k in range(readers)
    }
    jobs: dict[str, Any] = {
        "api_index": [0, 0, ""],
        "api_memory": [0, 0, ""],
        "terminal_index": [0, 0, ""],
        "embed": [0, 0, ""],
        "reindex": [0, 0, ""],
    }

    def count(name: str, ok: bool, why: str = "") -> None:
        jobs[name][0 if ok else 1] += 1
        if not ok and not jobs[name][2]:
            jobs[name][2] = why[-300:]

    spans: list[tuple[str, float, float]] = []  # (job, start, end), seconds into the run

    def cli(name: str, *args: str) -> None:
        t0 = time.time() - start
        out = subprocess.run([CLAWKB, "--kb", str(home), *args], capture_output=True, text=True)
        spans.append((name, round(t0, 1), round(time.time() - start, 1)))
        count(name, out.returncode == 0, out.stderr.strip())

    rss: list[tuple[float, int]] = []
    anon: list[tuple[float, int]] = []
    worker_rss: list[tuple[float, int]] = []
    rounds = [0]
    done_rounds: list[int] = []  # API write rounds done at each heap sample

    def api_writer() -> None:  # every second: rewrite 5 files, delete one, add one; a memory
        wrng = random.Random(11)
        alive = list(range(stable, stable + churn))
        next_new = stable + churn
        with httpx.Client(base_url=url, timeout=300, trust_env=False) as http:
            time.sleep(max(0.0, start + quiet - time.time()))
            while time.time() < until:
                rounds[0] += 1
                for i in wrng.sample(range(split), 5):
                    write_file(api_dir, i, rounds[0], wrng)
                gone = alive.pop(wrng.randrange(len(alive)))
                (api_dir / f"f{gone:05d}.md").unlink()
                write_file(api_dir, next_new, 0, wrng)
                alive.append(next_new)
                next_new += 1
                r = http.post("/api/v1/index", json={"path": str(api_dir)})
                count("api_index", r.status_code == 200, r.text)
                note = {"text": f"soak note {rounds[0] % 7}", "tags": ["soak"]}
                r = http.post("/api/v1/memory", json=note)
                count("api_memory", r.status_code == 200, r.text)
                time.sleep(1.0)

    def terminal() -> None:  # every 30 s: a terminal `clawkb index` of other files
        trng = random.Random(13)
        version = 0
        time.sleep(max(0.0, start + quiet - time.time()))
        while time.time() + 30 < until:
            time.sleep(30)
            version += 1
            for i in trng.sample(range(split, stable), 5):
                write_file(term_dir, i, version, trng)
            cli("terminal_index", "index", str(term_dir))

    def jobs_once() -> None:  # `embed` a third of the way in, `reindex` two thirds in
        busy = seconds - quiet
        time.sleep(max(0.0, start + quiet + busy / 3 - time.time()))
        if dense:
            cli("embed", "embed")
        time.sleep(max(0.0, start + quiet + 2 * busy / 3 - time.time()))
        cli("reindex", "reindex")

    while time.time() < start:
        time.sleep(0.05)
    serving = _server_pids(server.pid, server_workers)
    cpu0 = _servers_cpu_s(serving)
    tree0 = _tree_cpu_s(server.pid)
    spy = _profile(server.pid, seconds, profile) if profile else None
    workers = [threading.Thread(target=fn) for fn in (api_writer, terminal, jobs_once)]
    for w in workers:
        w.start()
    cpu_quiet = None
    traces: dict[str, Any] = {}
    trace_at = 120.0 if seconds >= 240 else seconds / 2
    while time.time() < until:
        if trace is not None and "mid" not in traces and time.time() >= start + trace_at:
            from soak_trace import request

            traces["mid"] = request(trace, "mid", workers=server_workers)
        if cpu_quiet is None and time.time() >= start + quiet:
            cpu_quiet = _servers_cpu_s(serving) - cpu0
        rss.append((time.time() - start, _servers_rss_kb(serving)))
        anon.append((time.time() - start, _servers_rss_kb(serving, "RssAnon")))
        done_rounds.append(rounds[0])
        worker_rss.append((time.time() - start, _helpers_rss_kb(serving)))
        time.sleep(min(5.0, max(0.05, start + quiet - time.time())) if cpu_quiet is None else 5)
    server_cpu = _servers_cpu_s(serving) - cpu0
    tree_cpu = _tree_cpu_s(server.pid) - tree0
    by_process = _rss_by_process(serving)
    restarted = _server_pids(server.pid, server_workers) != serving
    load = os.getloadavg()
    for w in workers:
        w.join()
    if trace is not None:
        from soak_trace import request

        traces["end"] = request(trace, "end", workers=server_workers)
    rss.append((time.time() - start, _servers_rss_kb(serving)))
    anon.append((time.time() - start, _servers_rss_kb(serving, "RssAnon")))
    done_rounds.append(rounds[0])
    worker_rss.append((time.time() - start, _helpers_rss_kb(serving)))
    if spy is not None:
        spy.wait(timeout=120)
    results = {name: _collect(p, seconds + 600) for name, p in procs.items()}
    cache_hits = _cache_hits(url)
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    merged = _merge_readers(results)
    lat, took = merged["latencies"], merged["server_ms"]
    in_quiet = sum(1 for t in merged.get("done_at", []) if t < start + quiet)
    cpu_quiet = cpu_quiet or 0.0
    errors, empty, wrong = merged["errors"], merged["empty"], merged["wrong"]
    first_error, first_wrong = merged["first_error"], merged["first_wrong"]
    crashed = [n for n, r in results.items() if r.get("crashed")]
    from clawkb.maintenance.doctor import run_doctor

    doctor = run_doctor(home)
    with KnowledgeBase.open(home) as kb:
        final = kb.repo.counts()
    warm = [kb for t, kb in rss if t >= seconds * 0.25]
    second_half = [kb for t, kb in rss if t >= seconds * 0.5]
    return {
        "seconds": seconds,
        "readers": readers,
        "server_workers": server_workers,
        "answered_by": dict(sorted(Counter(merged.get("answered_by", [])).items())),
        "workers_restarted": restarted,
        "rss_by_process_end_mb": by_process,
        "think_ms": think * 1000,
        "client": client,
        "client_cpu_ms_per_search": round(
            1000 * merged.get("client_cpu_s", 0.0) / max(1, len(lat)), 2
        ),
        "dense": dense,
        "searches": len(lat),
        "errors": errors,
        "empty": empty,
        "wrong": wrong,
        "first_error": first_error,
        "first_wrong": first_wrong,
        **percentiles(lat),
        "max_ms": round(max(lat), 1) if lat else float("nan"),
        "server_p50_ms": round(pct(took, 0.50), 2),
        "server_p99_ms": round(pct(took, 0.99), 2),
        "server_cpu_s": round(server_cpu, 1),
        "server_cpu_ms_per_search": round(1000 * server_cpu / max(1, len(lat)), 2),
        "tree_cpu_s": round(tree_cpu, 1),
        "quiet_seconds": quiet,
        "quiet_searches": in_quiet,
        "quiet_cpu_ms_per_search": round(1000 * cpu_quiet / max(1, in_quiet), 2)
        if in_quiet
        else None,
        "busy_cpu_ms_per_search": round(
            1000 * (server_cpu - cpu_quiet) / max(1, len(lat) - in_quiet), 2
        ),
        "loadavg_end": [round(x, 2) for x in load],
        "rss_mb": [(round(t), round(kb / 1024, 1)) for t, kb in rss],
        "anon_mb": [(round(t), round(kb / 1024, 1)) for t, kb in anon],
        "slope_from_s": slope_start(seconds),
        "rss_slope_mb_min": rss_slope([(t, kb / 1024) for t, kb in rss], slope_start(seconds)),
        "anon_slope_mb_min": rss_slope([(t, kb / 1024) for t, kb in anon], slope_start(seconds)),
        "rss_slope_second_half_mb_min": rss_slope([(t, kb / 1024) for t, kb in rss], seconds / 2),
        "heap_slope_second_half_mb_min": rss_slope([(t, kb / 1024) for t, kb in anon], seconds / 2),
        "heap_per_round_second_half_kb": per_round_kb(
            [(t, kb / 1024, n) for (t, kb), n in zip(anon, done_rounds, strict=True)],
            seconds / 2,
        ),
        "flat_mb_min": FLAT_MB_MIN,
        "rss_after_warmup_mb": (round(warm[0] / 1024, 1), round(warm[-1] / 1024, 1))
        if warm
        else None,
        "rss_second_half_range_mb": (
            round(min(second_half) / 1024, 1),
            round(max(second_half) / 1024, 1),
        )
        if second_half
        else None,
        "worker_rss_mb": [(round(t), round(kb / 1024, 1)) for t, kb in worker_rss],
        "jobs": jobs,
        "api_rounds": rounds[0],
        "crashed": crashed,
        "server_tracebacks": sum("Traceback" in ln for ln in server_lines),
        "doctor_healthy": doctor.healthy,
        "doctor": [f.line() for f in doctor.findings],
        "final_documents": final["documents"],
        "final_chunks": final["chunks"],
        "trace": traces,
        "job_spans": spans,
        "result_cache_hits": cache_hits,
        "timeline": timeline(merged.get("done_at", []), lat, start, spans),
    }


def _cache_hits(url: str) -> int | None:
    """Searches the server answered from its result cache (``/metrics``, all workers)."""
    import httpx

    try:
        text = httpx.get(f"{url}/metrics", timeout=30, trust_env=False).text
    except httpx.HTTPError:
        return None
    m = re.search(r"^clawkb_search_cache_hits_total (\S+)$", text, re.M)
    return int(float(m.group(1))) if m else None


def timeline(
    done_at: list[float], lat: list[float], start: float, spans: list[tuple[str, float, float]]
) -> list[dict[str, Any]]:
    """Client latency per 10-s window: searches, p50 / p99 / max, and the jobs that ran
    in the window (where the tail comes from)."""
    buckets: dict[int, list[float]] = {}
    for t, ms in zip(done_at, lat, strict=False):
        buckets.setdefault(int((t - start) // 10), []).append(ms)
    rows = []
    for b in sorted(buckets):
        lo, hi = b * 10, b * 10 + 10
        vals = buckets[b]
        running = sorted({n for n, s, e in spans if s < hi and e > lo})
        rows.append(
            {
                "from_s": lo,
                "searches": len(vals),
                "p50_ms": round(pct(vals, 0.5), 1),
                "p99_ms": round(pct(vals, 0.99), 1),
                "max_ms": round(max(vals), 1),
                "over_100ms": sum(v > 100 for v in vals),
                "jobs": running,
            }
        )
    return rows


def report_server_md(r: dict[str, Any], niced: bool) -> str:
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    j = r["jobs"]
    warm = r["rss_after_warmup_mb"] or ("-", "-")

    quiet_flag = f" --quiet-seconds {r['quiet_seconds']:g}" if r.get("quiet_seconds") else ""
    n = r.get("server_workers", 1)
    if n > 1:
        quiet_flag += f" --workers {n}"
    servers = f"the {n} workers and their parent" if n > 1 else "the server"

    def job(name: str) -> str:
        ok, failed, _ = j[name]
        return f"{ok} / {failed}"

    lines = [
        "# Soak: `clawkb serve` under readers, an API writer, a terminal writer and jobs",
        "",
        f"Run {when}, `bench/soak.py --seconds {r['seconds']:g}"
        f"{quiet_flag}`"
        f" on {os.cpu_count()} cores"
        f"{' under `nice -n 10`' if niced else ''}; the machine is shared with other"
        f" engineers' jobs (load average 1/5/15 min at the end"
        f" {' / '.join(f'{x:.1f}' for x in r['loadavg_end'])}), so"
        " latencies include waiting for a core. Dense"
        f" {'on (static embedder; `embed` runs once, a third of the way in)' if r['dense'] else 'off'}.",
        "",
        f"{r['readers']} reader processes search over HTTP (`/api/v1/search`, default mode,"
        f" {r['think_ms']:g} ms pause between requests; client:"
        f" {'httpx' if r.get('client') == 'httpx' else 'the standard library, keep-alive'}) for the unique word of a file that"
        " always exists; *empty* = that file is not among the 5 hits, *wrong* = it is not"
        " first. Meanwhile: every second the API writer rewrites 5 files, deletes one,"
        " adds one and posts `/api/v1/index`, then stores a memory (`/api/v1/memory`); every"
        " 30 s a terminal `clawkb index` rewrites 5 other files; `clawkb embed` once and"
        " `clawkb reindex` once (two thirds in).",
        "",
        "| measure | value | target |",
        "|---|---|---|",
        f"| searches | {r['searches']} | |",
        f"| errors (non-200 or no answer) | {r['errors']} | 0 |",
        f"| empty for an existing file | {r['empty']} | 0 |",
        f"| wrong (the file not first) | {r['wrong']} | 0 |",
        f"| client latency p50 / p95 / p99 / max | {r['p50_ms']} / {r['p95_ms']} /"
        f" {r['p99_ms']} / {r['max_ms']} ms | p99 <= 100 ms |",
        f"| server-side search time p50 / p99 (`took_ms`) | {r['server_p50_ms']} /"
        f" {r['server_p99_ms']} ms | |",
        f"| CPU of {servers} (all threads, writes included) / per search | {r['server_cpu_s']} s /"
        f" {r['server_cpu_ms_per_search']} ms | |",
        *(
            [
                f"| searches answered from the result cache | {r['result_cache_hits']}"
                f" ({100 * r['result_cache_hits'] / max(1, r['searches']):.1f} %) | |"
            ]
            if r.get("result_cache_hits") is not None
            else []
        ),
        *(
            [f"| CPU of the reader clients per search | {r['client_cpu_ms_per_search']} ms | |"]
            if "client_cpu_ms_per_search" in r
            else []
        ),
        *(
            [
                "| client p99 per 10-s window: median / worst; windows over 100 ms |"
                f" {pct([w['p99_ms'] for w in r['timeline']], 0.5)} /"
                f" {max(w['p99_ms'] for w in r['timeline'])} ms;"
                f" {sum(w['p99_ms'] > 100 for w in r['timeline'])} of {len(r['timeline'])} | |"
            ]
            if r.get("timeline")
            else []
        ),
        *(
            [
                "| CPU of the server with its children (embedding worker, writer process,"
                f" parser sandboxes) | {r['tree_cpu_s']} s | |"
            ]
            if "tree_cpu_s" in r
            else []
        ),
        *(
            [
                f"| server CPU per search, readers alone (first {r['quiet_seconds']:g} s,"
                f" {r['quiet_searches']} searches) / with the writers |"
                f" {r['quiet_cpu_ms_per_search']} / {r['busy_cpu_ms_per_search']} ms | |"
            ]
            if r.get("quiet_seconds")
            else []
        ),
        f"| RSS of {servers} after warm-up (25% in -> end) | {warm[0]} -> {warm[1]} MB | flat |",
        f"| server RSS slope from {r['slope_from_s']:g} s to the end, all / heap (`RssAnon`)"
        f" | {r['rss_slope_mb_min']} / {r['anon_slope_mb_min']} MB/min | |",
        *(
            [
                "| server slope over the second half, RSS / heap (`RssAnon`); heap per API"
                f" write round | {r['rss_slope_second_half_mb_min']} /"
                f" {r['heap_slope_second_half_mb_min']} MB/min;"
                f" {r['heap_per_round_second_half_kb']} kB | flat: heap <= {r['flat_mb_min']} MB/min |"
            ]
            if "heap_slope_second_half_mb_min" in r
            else []
        ),
        *(
            [
                "| server RSS in the second half (min / max) |"
                f" {r['rss_second_half_range_mb'][0]} / {r['rss_second_half_range_mb'][1]} MB | |"
            ]
            if r.get("rss_second_half_range_mb")
            else []
        ),
        *(
            [
                "| RSS of the server's children at the end (embedding worker, writer process) |"
                f" {r['worker_rss_mb'][-1][1]} MB | |"
            ]
            if r.get("worker_rss_mb")
            else []
        ),
        f"| API `/index` rounds ok / failed | {job('api_index')} | 0 failed |",
        f"| API `/memory` ok / failed | {job('api_memory')} | 0 failed |",
        f"| terminal `index` ok / failed | {job('terminal_index')} | 0 failed |",
        f"| `embed` ok / failed | {job('embed')} | 0 failed |",
        f"| `reindex` ok / failed | {job('reindex')} | 0 failed |",
        f"| crashed reader processes | {', '.join(r['crashed']) or 'none'} | none |",
        f"| tracebacks in the server log | {r['server_tracebacks']} | 0 |",
        f"| `clawkb doctor` afterwards | {'healthy' if r['doctor_healthy'] else 'PROBLEMS'} | healthy |",
        f"| final documents / chunks | {r['final_documents']} / {r['final_chunks']} | |",
        *(
            [
                "| RSS per process at the end (MB) | "
                + "; ".join(f"{what}: {mb}" for what, mb in r["rss_by_process_end_mb"])
                + " | |",
                f"| a worker restarted during the run | {'yes' if r['workers_restarted'] else 'no'} | no |",
                "| searches answered per worker | "
                + ", ".join(f"{k}: {v}" for k, v in r.get("answered_by", {}).items())
                + " | |",
            ]
            if r.get("rss_by_process_end_mb")
            else []
        ),
        "",
        "Server RSS (seconds in, MB): " + ", ".join(f"{t}: {mb}" for t, mb in r["rss_mb"]),
        "",
        "Server heap, `RssAnon` (seconds in, MB): "
        + ", ".join(f"{t}: {mb}" for t, mb in r["anon_mb"]),
    ]
    if r.get("worker_rss_mb"):
        lines += [
            "",
            "RSS of the server's children (seconds in, MB): "
            + ", ".join(f"{t}: {mb}" for t, mb in r["worker_rss_mb"]),
        ]
    errs = [("reader", r["first_error"]), ("result", r["first_wrong"])]
    errs += [(name, why) for name, (_, _, why) in j.items() if why]
    errs = [(k, v) for k, v in errs if v]
    lines += ["", "`clawkb doctor` after the run:", "", "```", *r["doctor"], "```"]
    if errs:
        lines += ["", "First problems:", ""] + [f"- {k}: `{v}`" for k, v in errs]
    return "\n".join(lines) + "\n"


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
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="the older soak: reader and writer processes on the KB itself, no server",
    )
    ap.add_argument(
        "--think-ms", type=float, default=10.0, help="pause between a client's searches"
    )
    ap.add_argument(
        "--quiet-seconds",
        type=float,
        default=0.0,
        help="readers alone for this long first (CPU per search without writes)",
    )
    ap.add_argument(
        "--profile",
        type=Path,
        help="sample the server with py-spy into this file (collapsed stacks per thread)",
    )
    ap.add_argument(
        "--trace",
        type=Path,
        help="run the server under tracemalloc, snapshots at 120 s and the end into this folder",
    )
    ap.add_argument(
        "--workers", type=int, default=1, help="`clawkb serve --workers N` (server processes)"
    )
    ap.add_argument(
        "--client",
        choices=("plain", "httpx"),
        default="plain",
        help="the readers' HTTP client: the standard library's (default) or httpx (rounds 1-10)",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="clawkb-soak-") as tmp:
        if args.in_process:
            r = run(args.seconds, args.readers, args.stable, args.churn, Path(tmp))
        else:
            r = run_server(
                args.seconds,
                args.readers,
                args.stable,
                args.churn,
                Path(tmp),
                args.think_ms / 1000,
                args.profile,
                args.quiet_seconds,
                args.trace,
                args.workers,
                args.client,
            )
    niced = os.nice(0) > 0
    md = report_md(r) if args.in_process else report_server_md(r, niced)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(md, encoding="utf-8")
    (args.out.with_suffix(".json")).write_text(json.dumps(r, indent=1), encoding="utf-8")
    print(md)
    if not args.in_process:
        slope = r["heap_slope_second_half_mb_min"]
        flat = slope is not None and slope <= FLAT_MB_MIN
        print(
            f"server heap slope over the second half: {slope} MB/min,"
            f" {r['heap_per_round_second_half_kb']} kB per API write round"
            f" ({'flat' if flat else 'NOT flat'}: <= {FLAT_MB_MIN} MB/min)"
        )
    if args.in_process:
        ok = (
            r["errors"] == 0
            and r["empty_for_existing"] == 0
            and not r["crashed"]
            and r["doctor_healthy"]
            and not r["writer"].get("failures")
        )
    else:
        ok = (
            r["errors"] == 0
            and r["empty"] == 0
            and r["wrong"] == 0
            and not r["crashed"]
            and r["doctor_healthy"]
            and not any(failed for _, failed, _ in r["jobs"].values())
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
