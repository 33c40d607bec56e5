"""What the parser sandbox costs per file (parsers/sandbox.py).

One HTML page and one DOCX document, each parsed three ways in the same run:
in-process (the peer: no isolation at all), in a forked worker with the
resource limits only, and in the full sandbox (limits + seccomp filter).
Medians over ``--runs``; the ratio to in-process is the number to watch.

    .venv/bin/python bench/sandbox_overhead.py [--runs 100]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from clawkb.parsers import sandbox
from clawkb.parsers.docx import DocxParser
from clawkb.parsers.html import HtmlParser
from clawkb.parsers.limits import call_isolated


def _html() -> bytes:
    body = "<h2>UART</h2><p>Baud rate setup 115200, 串口波特率配置.</p>" * 50
    return f"<html><head><title>t</title></head><body>{body}</body></html>".encode()


def _docx() -> bytes:
    import docx

    document = docx.Document()
    for i in range(50):
        document.add_heading(f"Section {i}", level=2)
        document.add_paragraph("The watchdog resets the board; 看门狗复位.")
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


def _median_ms(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1000, 3)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=100)
    args = ap.parse_args()
    status = sandbox.prepare()
    out: dict[str, Any] = {"seccomp": status.seccomp, "runs": args.runs, "formats": {}}
    for name, parser, data in (
        ("html", HtmlParser(), _html()),
        ("docx", DocxParser(), _docx()),
    ):
        path = f"bench.{name}"
        parser.parse(data, path)  # warm imports in the parent, as a real run does
        inproc = _median_ms(lambda p=parser, d=data, f=path: p.parse(d, f), args.runs)
        limits = _median_ms(
            lambda p=parser, d=data, f=path: call_isolated(p.parse, (d, f), 60, f, seccomp=False),
            args.runs,
        )
        full = _median_ms(
            lambda p=parser, d=data, f=path: call_isolated(p.parse, (d, f), 60, f), args.runs
        )
        out["formats"][name] = {
            "in_process_ms": inproc,
            "isolated_limits_ms": limits,
            "sandboxed_ms": full,
            "sandboxed_vs_in_process": round(full / inproc, 2),
            "seccomp_extra_ms": round(full - limits, 3),
        }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
