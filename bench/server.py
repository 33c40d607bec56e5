"""`clawkb serve` against its targets, in one run (loopback only, bounded in time).

1. Search over HTTP vs the library call at ~10k chunks: p50 overhead (target <= 2 ms).
2. 50 concurrent async httpx clients for --duration s while watch re-indexes 2,000
   changed files: errors, empty results for existing files (both target 0),
   throughput and p95.
3. Watch latency, saved -> searchable (median of 20, target <= 2 s).
4. The web page in headless chromium: first-load bytes (target <= 60 KB) and
   keystroke -> first results at 10k chunks (target <= 100 ms).

    .venv/bin/python bench/server.py [--duration 60] [--files 2000]
    .venv/bin/python bench/server.py --page-only    # only 4., into its own section

Writes bench/results/server-latest.md (and .json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
CLAWKB = str(Path(sys.executable).parent / "clawkb")
RESULTS = ROOT / "bench" / "results"
WORDS = [
    "clock",
    "reset",
    "uart",
    "spi",
    "i2c",
    "dma",
    "timer",
    "gpio",
    "adc",
    "pwm",
    "irq",
    "flash",
    "sram",
    "boot",
    "loader",
    "kernel",
    "driver",
    "thread",
    "mutex",
    "queue",
    "buffer",
    "packet",
    "socket",
    "latency",
    "voltage",
    "current",
    "ground",
    "pull-up",
    "resistor",
    "时钟",
    "复位",
    "串口",
    "中断",
    "定时器",
    "引脚",
    "电压",
    "电流",
    "接地",
    "上拉",
    "电阻",
    "驱动",
    "内核",
    "缓冲",
    "队列",
    "延迟",
    "阻抗",
    "走线",
]


def make_corpus(root: Path, files: int, sections: int = 5) -> None:
    rng = random.Random(7)
    for i in range(files):
        parts = [f"# Note {i}\n"]
        for s in range(sections):
            body = " ".join(rng.choice(WORDS) for _ in range(60))
            parts.append(f"## Section {s}\n\nkey{i:05d} {body}\n")
        (root / f"n{i // 500:02d}").mkdir(exist_ok=True)
        (root / f"n{i // 500:02d}" / f"note{i:05d}.md").write_text(
            "\n".join(parts), encoding="utf-8"
        )


def start_server(home: Path, roots: list[Path], *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [CLAWKB, "--kb", str(home), "serve", *map(str, roots), "--port", "0", "--no-mcp", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        m = re.search(r"Serving on (http://\S+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in proc.stdout or ()], daemon=True).start()
            return proc, m.group(1)
    raise RuntimeError("server did not start")


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.wait(timeout=30)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")


def http_overhead(home: Path, url: str, queries: list[str]) -> dict[str, Any]:
    from clawkb import KnowledgeBase

    lib, http = [], []
    with KnowledgeBase.open(home) as kb, httpx.Client(base_url=url, trust_env=False) as c:
        for q in queries[:20]:  # warm both
            kb.search(q, limit=10)
            c.get("/api/v1/search", params={"q": q, "limit": 10})
        for _ in range(3):
            for q in queries:
                t = time.perf_counter()
                kb.search(q, limit=10)
                lib.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                r = c.get("/api/v1/search", params={"q": q, "limit": 10})
                http.append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200
    return {
        "library_p50_ms": statistics.median(lib),
        "http_p50_ms": statistics.median(http),
        "overhead_p50_ms": statistics.median(http) - statistics.median(lib),
        "http_p95_ms": pct(http, 95),
        "n": len(lib),
    }


async def load(url: str, files: int, duration: float, clients: int) -> dict[str, Any]:
    lat: list[float] = []
    errors = empties = 0
    first_error: list[str] = []
    stop_at = time.monotonic() + duration
    rng = random.Random(1)

    async def client() -> None:
        nonlocal errors, empties
        async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=30) as c:
            while time.monotonic() < stop_at:
                i = rng.randrange(files)
                t = time.perf_counter()
                try:
                    r = await c.get("/api/v1/search", params={"q": f"key{i:05d}", "limit": 5})
                    ok = r.status_code == 200
                    if not ok:
                        first_error.append(f"{r.status_code} {r.text[:200]}")
                except httpx.HTTPError as exc:
                    ok = False
                    first_error.append(f"{type(exc).__name__}: {exc}")
                lat.append((time.perf_counter() - t) * 1000)
                if not ok:
                    errors += 1
                elif not any(f"note{i:05d}.md" in h["path"] for h in r.json()["hits"]):
                    empties += 1

    await asyncio.gather(*(client() for _ in range(clients)))
    return {
        "clients": clients,
        "seconds": duration,
        "requests": len(lat),
        "throughput_rps": len(lat) / duration,
        "p50_ms": statistics.median(lat),
        "p95_ms": pct(lat, 95),
        "errors": errors,
        "empty_for_existing": empties,
        "first_errors": first_error[:3],
    }


def rewrite(root: Path, files: int) -> float:
    t = time.perf_counter()
    for path in sorted(root.rglob("note*.md"))[:files]:
        path.write_text(path.read_text(encoding="utf-8") + "\nedited once more\n", encoding="utf-8")
    return time.perf_counter() - t


def watch_latency(url: str, root: Path, n: int = 20) -> dict[str, Any]:
    out = []
    with httpx.Client(base_url=url, trust_env=False) as c:
        for k in range(n):
            word = f"fresh{k:03d}zz"
            (root / f"fresh{k:03d}.md").write_text(
                f"# Fresh\n\n{word} saved now\n", encoding="utf-8"
            )
            t = time.perf_counter()
            while c.get("/api/v1/search", params={"q": word}).json()["count"] == 0:
                if time.perf_counter() - t > 30:
                    break
                time.sleep(0.01)
            out.append(time.perf_counter() - t)
            time.sleep(0.2)
    return {"median_s": statistics.median(out), "max_s": max(out), "n": n}


def browser(url: str) -> dict[str, Any]:
    chromium = shutil.which("chromium")
    if not chromium:
        return {"skipped": "chromium is not installed"}
    from playwright.sync_api import sync_playwright

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium, args=args)
        page = b.new_page()
        page.goto(url + "/")
        page.wait_for_load_state("networkidle")
        size = page.evaluate(
            "performance.getEntriesByType('navigation').concat(performance.getEntriesByType("
            "'resource')).reduce((s, e) => s + (e.transferSize || e.encodedBodySize || 0), 0)"
        )
        times: list[float] = []
        fetches: list[float] = []  # request sent -> results rendered (no debounce, no key event)
        for q in ["串口", "时钟", "key00042", "reset", "阻抗", "uart", "定时器", "gpio"] * 4:
            page.fill("#q", q[:-1])
            page.wait_for_timeout(300)  # the prefix's own search settles
            page.evaluate(
                "() => { window.__t = null; const b = document.body;"
                " const n = b.dataset.searches; new MutationObserver((m, o) => {"
                " if (b.dataset.searches !== n) { window.__t = performance.now() - window.__k;"
                " o.disconnect(); } }).observe(b, {attributes: true}); }"
            )
            page.evaluate("window.__k = performance.now()")
            page.locator("#q").press_sequentially(q[-1])
            deadline = time.perf_counter() + 10
            while page.evaluate("window.__t") is None and time.perf_counter() < deadline:
                time.sleep(0.005)  # polled: the page's CSP forbids wait_for_function's eval
            times.append(page.evaluate("window.__t"))
            fetches.append(float(page.evaluate("document.body.dataset.lastSearchMs")))
        b.close()
    return {"first_load_bytes": size, "keystroke_to_results_ms_median": statistics.median(times),
            "keystroke_to_results_ms_p95": pct(times, 95), "n": len(times),
            "fetch_to_render_ms_median": statistics.median(fetches)}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--page-only", action="store_true", help="only the page measurements")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="clawkb-serve-bench-"))
    try:
        root, home = tmp / "docs", tmp / "kb"
        root.mkdir()
        make_corpus(root, a.files)
        from clawkb import KnowledgeBase

        with KnowledgeBase.open(home, create=True) as kb:
            kb.index([root])
            chunks = kb.status()["chunks"]
        print(f"corpus: {a.files} files, {chunks} chunks", flush=True)
        if a.page_only:
            proc, url = start_server(home, [root])
            try:
                page = browser(url)
            finally:
                stop(proc)
            print("browser", page, flush=True)
            machine_load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
            write_page({"chunks": chunks, "files": a.files, "browser": page, "load": machine_load})
            return 0
        proc, url = start_server(home, [root], "--watch")
        try:
            queries = [f"key{i:05d} {WORDS[i % len(WORDS)]}" for i in range(0, a.files, 10)]
            overhead = http_overhead(home, url, queries)
            print("http overhead", overhead, flush=True)
            page = browser(url)
            print("browser", page, flush=True)
            latency = watch_latency(url, root)
            print("watch latency", latency, flush=True)
            writer = threading.Thread(target=lambda: (time.sleep(2), rewrite(root, a.files)))
            writer.start()
            conc = asyncio.run(load(url, a.files, a.duration, a.clients))
            writer.join()
            with httpx.Client(base_url=url, trust_env=False) as c:
                conc["watch_runs"] = c.get("/api/v1/status").json()["server"]["watch"]
            print("concurrency", conc, flush=True)
        finally:
            stop(proc)
        report = {"chunks": chunks, "files": a.files, "http": overhead, "browser": page,
                  "watch_latency": latency, "concurrency": conc}  # fmt: skip
        write(report)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def write(r: dict[str, Any]) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "server-latest.json").write_text(json.dumps(r, indent=2, default=str))
    h, b, w, c = r["http"], r["browser"], r["watch_latency"], r["concurrency"]
    ok = lambda cond: "met" if cond else "**missed**"  # noqa: E731
    lines = [
        "# clawkb serve — benchmark (bench/server.py)",
        "",
        f"Corpus: {r['files']} Markdown files, {r['chunks']} chunks; server and clients on loopback,"
        " one 2-core machine shared with other jobs.",
        "",
        "| what | result | target | |",
        "|---|---|---|---|",
        f"| search p50, library call | {h['library_p50_ms']:.2f} ms | | |",
        f"| search p50, over HTTP (keep-alive) | {h['http_p50_ms']:.2f} ms | | |",
        f"| HTTP overhead p50 | {h['overhead_p50_ms']:.2f} ms | ≤ 2 ms | {ok(h['overhead_p50_ms'] <= 2)} |",
        f"| {c['clients']} clients × {c['seconds']:.0f} s during a {r['files']}-file re-index: errors"
        f" | {c['errors']} | 0 | {ok(c['errors'] == 0)} |",
        f"| … empty results for existing files | {c['empty_for_existing']} | 0 |"
        f" {ok(c['empty_for_existing'] == 0)} |",
        f"| … throughput | {c['throughput_rps']:.0f} req/s | | |",
        f"| … latency p50 / p95 | {c['p50_ms']:.1f} / {c['p95_ms']:.1f} ms | | |",
        f"| watch: saved → searchable, median of {w['n']} | {w['median_s']:.2f} s (max"
        f" {w['max_s']:.2f}) | ≤ 2 s | {ok(w['median_s'] <= 2)} |",
    ]
    if "skipped" in b:
        lines.append(f"| browser | skipped: {b['skipped']} | | |")
    else:
        lines += [
            *_page_rows(b),
        ]
    lines += ["", f"Watch during the load test: `{json.dumps(c.get('watch_runs'))}`", ""]
    (RESULTS / "server-latest.md").write_text("\n".join(lines))
    print("\n".join(lines))


def _page_rows(b: dict[str, Any]) -> list[str]:
    ok = lambda cond: "met" if cond else "**missed**"  # noqa: E731
    return [
        f"| page first load, bytes transferred | {b['first_load_bytes'] / 1024:.1f} KB | ≤ 60 KB"
        f" | {ok(b['first_load_bytes'] <= 60 * 1024)} |",
        f"| keystroke → first results in chromium, median / p95 |"
        f" {b['keystroke_to_results_ms_median']:.0f} / {b['keystroke_to_results_ms_p95']:.0f} ms"
        f" | ≤ 100 ms | {ok(b['keystroke_to_results_ms_median'] <= 100)} |",
        f"| … of which request sent → results rendered, median |"
        f" {b.get('fetch_to_render_ms_median', float('nan')):.0f} ms | | |",
    ]


PAGE_START, PAGE_END = "<!-- page -->", "<!-- /page -->"


def write_page(r: dict[str, Any]) -> None:
    """The page's rows as their own section of server-latest.md (the rest is kept)."""
    b = r["browser"]
    rows = [f"| browser | skipped: {b['skipped']} |  | |"] if "skipped" in b else _page_rows(b)
    section = "\n".join([
        PAGE_START,
        "## The page (`bench/server.py --page-only`)",
        "",
        f"Corpus: {r['files']} Markdown files, {r['chunks']} chunks; headless chromium and the"
        " server on loopback; each keystroke is measured from the key press to the results"
        " rendered (the page's 10 ms input debounce included), 32 keystrokes. Load average"
        f" during the run: {r.get('load', '?')} on 2 cores (other jobs), so milliseconds here"
        " are noisy.",
        "",
        "| what | result | target | |",
        "|---|---|---|---|",
        *rows,
        PAGE_END,
    ])  # fmt: skip
    path = RESULTS / "server-latest.md"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if PAGE_START in text and PAGE_END in text:
        head, _, rest = text.partition(PAGE_START)
        text = head + section + rest.partition(PAGE_END)[2]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text, encoding="utf-8")
    print(section)


if __name__ == "__main__":
    sys.exit(main())
