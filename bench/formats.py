"""Spreadsheet parsing throughput: clawkb's XLSX/CSV parsers vs their bare readers.

    .venv/bin/python bench/formats.py                 # 100k rows, 3 repeats
    .venv/bin/python bench/formats.py --rows 20000 --repeats 1

Peers, on the same generated fixture (8 columns: text, integers, floats,
dates; seeded), timed as median wall seconds over the repeats:

* XLSX — ``openpyxl`` read-only iteration (``load_workbook(read_only=True,
  data_only=True)`` + ``iter_rows(values_only=True)``), which is the reader
  clawkb itself uses, so the ratio is the cost of what clawkb adds: zip-bomb
  verification (inflating every member once more), merged-cell scan, value
  formatting, header detection and building the row-block slices;
  ``pandas.read_excel`` (openpyxl engine) when pandas is installed.
* CSV — the standard ``csv`` module reading the decoded text.

rows/s = data rows / seconds. Writes bench/results/formats-<date>.json and
prints a Markdown table.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from shared_data import environment  # noqa: E402

COLUMNS = ["Part", "Qty", "Value", "Tolerance", "Package", "Vendor", "Price", "Updated"]


def make_rows(n: int, seed: int = 7) -> list[list[Any]]:
    rng = random.Random(seed)
    packages = ["0402", "0603", "0805", "SOT-23", "QFN-48", "LQFP-64"]
    vendors = ["TI", "ST", "NXP", "Murata", "Yageo", "立创"]
    start = dt.datetime(2024, 1, 1)
    return [
        [
            f"PN-{i:06d}",
            rng.randint(1, 5000),
            f"{rng.choice([1, 2.2, 4.7, 10, 47, 100])}{rng.choice(['k', 'nF', 'uF', 'R'])}",
            rng.choice([0.01, 0.05, 0.1]),
            rng.choice(packages),
            rng.choice(vendors),
            round(rng.random() * 20, 4),
            start + dt.timedelta(days=rng.randint(0, 700)),
        ]
        for i in range(n)
    ]


def make_xlsx(rows: list[list[Any]]) -> bytes:
    import openpyxl

    wb = openpyxl.Workbook(write_only=True)
    ws = wb.create_sheet("BOM")
    ws.append(COLUMNS)
    for row in rows:
        ws.append(row)
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def make_csv(rows: list[list[Any]]) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(COLUMNS)
    writer.writerows(rows)
    return buf.getvalue().encode("utf-8")


def clawkb_xlsx(data: bytes) -> int:
    from clawkb.parsers.spreadsheet import XlsxParser

    return XlsxParser().parse(data, "bench.xlsx").metadata["sheets"][0]["rows"] - 1


def openpyxl_readonly(data: bytes) -> int:
    import openpyxl

    wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    n = sum(1 for _ in wb.worksheets[0].iter_rows(values_only=True)) - 1
    wb.close()
    return n


def pandas_read_excel(data: bytes) -> int:
    import pandas

    return len(pandas.read_excel(io.BytesIO(data), engine="openpyxl"))


def clawkb_csv(data: bytes) -> int:
    from clawkb.parsers.spreadsheet import CsvParser

    return CsvParser().parse(data, "bench.csv").metadata["sheets"][0]["rows"] - 1


def stdlib_csv(data: bytes) -> int:
    return sum(1 for _ in csv.reader(io.StringIO(data.decode("utf-8")))) - 1


def timed(fn: Callable[[bytes], int], data: bytes, repeats: int) -> tuple[float, int]:
    times, rows = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        rows = fn(data)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), rows


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out-dir", type=Path, default=HERE / "results")
    args = ap.parse_args()
    rows = make_rows(args.rows)
    fixtures = {"xlsx": make_xlsx(rows), "csv": make_csv(rows)}
    engines: list[tuple[str, str, Callable[[bytes], int]]] = [
        ("xlsx", "clawkb XlsxParser", clawkb_xlsx),
        ("xlsx", "openpyxl read-only", openpyxl_readonly),
        ("csv", "clawkb CsvParser", clawkb_csv),
        ("csv", "stdlib csv", stdlib_csv),
    ]
    try:
        import pandas  # noqa: F401

        engines.insert(2, ("xlsx", "pandas.read_excel", pandas_read_excel))
    except ImportError:
        print("pandas not installed: pandas.read_excel peer skipped", file=sys.stderr)
    results = []
    for fmt, name, fn in engines:
        seconds, n = timed(fn, fixtures[fmt], args.repeats)
        if n != args.rows:
            raise SystemExit(f"{name} read {n} rows, expected {args.rows}")
        results.append(
            {"format": fmt, "engine": name, "seconds": seconds, "rows_per_s": n / seconds}
        )
        print(f"{name:<22} {seconds:7.3f} s  {n / seconds:>10,.0f} rows/s", file=sys.stderr)
    base = {r["format"]: r["rows_per_s"] for r in results if r["engine"].startswith("clawkb")}
    lines = [
        f"rows: {args.rows:,} · 8 columns · XLSX {len(fixtures['xlsx']) / 1e6:.1f} MB · "
        f"CSV {len(fixtures['csv']) / 1e6:.1f} MB · median of {args.repeats}",
        "",
        "| format | engine | seconds | rows/s | clawkb / engine (speed) |",
        "|---|---|---:|---:|---:|",
    ]
    for r in results:
        r["clawkb_ratio"] = base[r["format"]] / r["rows_per_s"]
        lines.append(
            f"| {r['format']} | {r['engine']} | {r['seconds']:.3f} | {r['rows_per_s']:,.0f} | {r['clawkb_ratio']:.2f}x |"
        )
    print("\n".join(lines))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / f"formats-{dt.date.today().isoformat()}.json"
    env = environment(("clawkb", "openpyxl", "pandas"))
    out.write_text(
        json.dumps({"rows": args.rows, "environment": env, "results": results}, indent=2) + "\n"
    )
    latest = args.out_dir / "formats-latest.md"
    trees = ""  # the section bench/formats_trees.py writes is kept
    if latest.exists() and "## Document trees" in latest.read_text("utf-8"):
        trees = "\n## Document trees" + latest.read_text("utf-8").split("## Document trees", 1)[1]
    latest.write_text("\n".join(lines) + "\n" + trees)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
