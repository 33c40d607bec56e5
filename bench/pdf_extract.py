"""PDF extraction benchmark: clawkb's PDF parser vs pdfplumber-only and pypdf.

    .venv/bin/python bench/pdf_extract.py            # or: bench/run_all.py --pdf
    .venv/bin/python bench/pdf_extract.py --repeat 5

Fixtures are generated here (bench/pdfgen.py, reportlab): the 30-page
bilingual datasheet (prose, headings, 5 ruled tables, running header/footer),
60 pages of bilingual prose, and 20 pages of ruled register tables. Each
extractor processes every fixture whole (open + every page) ``--repeat`` times
in this process; the best time gives pages/second. Ratios are clawkb ÷ peer
(above 1 means clawkb is faster).

Extractors:

* ``clawkb``: ``PdfParser().parse`` in-process — text, headings, tables as
  rows, everything it indexes (no worker process, no OCR needed here).
* ``pdfplumber-text``: ``page.extract_text()`` per page.
* ``pdfplumber+tables``: ``extract_text()`` and ``extract_tables()`` per page,
  the pdfplumber-only way to get what clawkb gets.
* ``pypdf``: ``page.extract_text()`` per page.
* ``pypdfium2-text``: raw pdfium text per page, the floor under clawkb.

Fidelity on the datasheet: for each golden fact (bench/pdfgen.py), is its
text on the page it was laid out on; and are the Chinese sentences exact.
Writes bench/results/pdf-<date>.json and bench/results/pdf-latest.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import io
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import pdfgen  # noqa: E402
from shared_data import write_results  # noqa: E402

PageTexts = list[str]
Extractor = Callable[[bytes], PageTexts]
_SPACE = re.compile(r"\s+")
CJK_SENTENCES = [
    "停止模式下所有时钟停止，唤醒时间典型值为 12 微秒",
    "待机模式电流典型值为 2.4 微安",
    "外部晶振 HSE 的频率范围为 4 至 26 MHz",
    "窗口看门狗在计数器到达窗口值之前刷新会产生复位",
]


def clawkb_pages(data: bytes) -> PageTexts:
    from clawkb.parsers.pdf import PdfParser

    doc = PdfParser().parse(data, "bench.pdf")
    pages = [""] * int(doc.metadata["pages"])
    for s in doc.slices:
        pages[(s.page or 1) - 1] += s.text + "\n"
    return pages


def plumber_pages(data: bytes, tables: bool = False) -> PageTexts:
    import pdfplumber

    out = []
    with pdfplumber.open(io.BytesIO(data)) as pdf:
        for page in pdf.pages:
            text = page.extract_text() or ""
            if tables:
                for table in page.extract_tables():
                    text += "\n" + "\n".join(" | ".join(c or "" for c in row) for row in table)
            out.append(text)
            page.close()
    return out


def pypdf_pages(data: bytes) -> PageTexts:
    import pypdf

    return [p.extract_text() or "" for p in pypdf.PdfReader(io.BytesIO(data)).pages]


def pdfium_pages(data: bytes) -> PageTexts:
    import pypdfium2

    doc = pypdfium2.PdfDocument(data)
    try:
        out = []
        for page in doc:
            tp = page.get_textpage()
            out.append(tp.get_text_range())
            tp.close()
            page.close()
        return out
    finally:
        doc.close()


EXTRACTORS: dict[str, Extractor] = {
    "clawkb": clawkb_pages,
    "pdfplumber-text": plumber_pages,
    "pdfplumber+tables": lambda d: plumber_pages(d, tables=True),
    "pypdf": pypdf_pages,
    "pypdfium2-text": pdfium_pages,
}
PEERS = ("pdfplumber-text", "pdfplumber+tables", "pypdf")


def make_fixtures(folder: Path) -> tuple[dict[str, bytes], list[dict[str, Any]]]:
    markers = pdfgen.build_datasheet(folder / "datasheet.pdf")
    pdfgen.build_prose(folder / "prose.pdf", 60)
    pdfgen.build_tables(folder / "tables.pdf", 20)
    names = ("datasheet", "prose", "tables")
    return {n: (folder / f"{n}.pdf").read_bytes() for n in names}, pdfgen.golden_set(markers)


def time_one(fn: Extractor, data: bytes, repeat: int) -> tuple[float, PageTexts]:
    best, pages = float("inf"), []
    for _ in range(repeat):
        t0 = time.perf_counter()
        pages = fn(data)
        best = min(best, time.perf_counter() - t0)
    return best, pages


def fidelity(pages: PageTexts, golden: list[dict[str, Any]]) -> dict[str, Any]:
    flat = [_SPACE.sub("", p) for p in pages]
    facts = sum(
        1
        for g in golden
        if g["page"] <= len(flat) and _SPACE.sub("", g["expect_text"]) in flat[g["page"] - 1]
    )
    every = "".join(flat)
    cjk = sum(1 for s in CJK_SENTENCES if _SPACE.sub("", s) in every)
    lines = [_SPACE.sub("", ln) for p in pages for ln in p.split("\n")]
    rows = [r for table in pdfgen._tables().values() for r in table[1:]]
    intact = sum(1 for r in rows if any(_in_order(r, ln) for ln in lines))
    return {
        "facts_on_right_page": f"{facts}/{len(golden)}",
        "cjk_exact": f"{cjk}/{len(CJK_SENTENCES)}",
        "table_rows_on_one_line": f"{intact}/{len(rows)}",
    }


def _in_order(cells: list[str], line: str) -> bool:
    """All cells of a table row appear, in order, on one extracted line."""
    at = 0
    for cell in cells:
        at = line.find(_SPACE.sub("", cell), at)
        if at < 0:
            return False
    return True


def run(repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="clawkb-pdfbench-") as tmp:
        fixtures, golden = make_fixtures(Path(tmp))
    rows: list[dict[str, Any]] = []
    for name, data in fixtures.items():
        n_pages = len(pdfium_pages(data))
        for ext, fn in EXTRACTORS.items():
            seconds, pages = time_one(fn, data, repeat)
            row = {
                "fixture": name,
                "pages": n_pages,
                "extractor": ext,
                "seconds": seconds,
                "pages_per_s": n_pages / seconds,
            }
            if name == "datasheet":
                row.update(fidelity(pages, golden))
            rows.append(row)
            print(f"{name:<10} {ext:<18} {n_pages / seconds:8.1f} pages/s", file=sys.stderr)
    return {"rows": rows, "ratios": ratios(rows)}


def ratios(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    speed = {(r["fixture"], r["extractor"]): r["pages_per_s"] for r in rows}
    out: dict[str, dict[str, float]] = {}
    for fixture in dict.fromkeys(r["fixture"] for r in rows):
        out[fixture] = {
            peer: round(speed[(fixture, "clawkb")] / speed[(fixture, peer)], 2) for peer in PEERS
        }
    return out


def render(doc: dict[str, Any]) -> str:
    lines = [
        f"# PDF extraction — {doc['date']}",
        "",
        "| fixture | pages | extractor | pages/s | facts on right page | CJK exact | table rows on one line |",
        "|---|---:|---|---:|---|---|---|",
    ]
    for r in doc["rows"]:
        lines.append(
            f"| {r['fixture']} | {r['pages']} | {r['extractor']} | {r['pages_per_s']:.1f} | "
            f"{r.get('facts_on_right_page', '')} | {r.get('cjk_exact', '')} | "
            f"{r.get('table_rows_on_one_line', '')} |"
        )
    lines += [
        "",
        "clawkb speed ÷ peer speed (above 1: clawkb is faster):",
        "",
        "| fixture | " + " | ".join(PEERS) + " |",
        "|---|" + "---:|" * len(PEERS),
    ]
    for fixture, peers in doc["ratios"].items():
        lines.append(f"| {fixture} | " + " | ".join(f"{peers[p]:.2f}x" for p in PEERS) + " |")
    versions = ", ".join(f"{k} {v}" for k, v in doc["versions"].items())
    lines += [
        "",
        f"Versions: {versions}. Best of {doc['repeat']} runs per cell, one process, 2-core machine.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="PDF extraction benchmark")
    ap.add_argument("--repeat", type=int, default=3, help="runs per cell; the best counts")
    ap.add_argument("--out-dir", type=Path, default=HERE / "results")
    args = ap.parse_args(argv)
    doc: dict[str, Any] = {
        "date": dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "repeat": args.repeat,
    }
    doc["versions"] = {
        p: importlib.metadata.version(p) for p in ("pypdfium2", "pdfplumber", "pypdf", "reportlab")
    }
    doc.update(run(args.repeat))
    write_results(args.out_dir, f"pdf-{doc['date'][:10]}.json", "pdf-latest.md", doc, render)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
