"""Markdown parse speed: clawkb's parser on the bundled examples and a generated book.

    .venv/bin/python bench/markdown_parse.py              # 5 repeats
    .venv/bin/python bench/markdown_parse.py --repeats 3 --files 200

Corpora: every ``*.md`` under ``examples/``, and the generated 200-file mdBook
tree of :mod:`docs_tree` (English and Chinese chapters with tables, code and
lists). Timed as the median wall seconds of parsing every file (bytes in memory,
decoding included) over the repeats.

Peer, in the same run on the same bytes: a bare markdown-it-py CommonMark parse
with tables and inline parsing (``MarkdownIt("commonmark").enable("table").parse``),
the usual way Python tools read Markdown. clawkb's parser is built on
markdown-it-py's block parser, skips inline parsing and adds slices, heading
paths, front matter and link extraction; the ratio is clawkb / peer.

Writes ``bench/results/markdown-<date>.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import docs_tree  # noqa: E402


def _files(root: Path) -> list[tuple[str, bytes]]:
    return [(str(p), p.read_bytes()) for p in sorted(root.rglob("*.md"))]


def _time(fn: Callable[[], None], repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def _clawkb(files: list[tuple[str, bytes]]) -> Callable[[], None]:
    from clawkb.parsers.markdown import MarkdownParser

    parser = MarkdownParser()
    return lambda: [parser.parse(data, path) for path, data in files] and None


def _peer(files: list[tuple[str, bytes]]) -> Callable[[], None]:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable("table")
    texts = [data.decode("utf-8", "replace") for _, data in files]
    return lambda: [md.parse(t) for t in texts] and None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--files", type=int, default=200, help="Markdown files in the generated tree")
    ap.add_argument("--out-dir", type=Path, default=HERE / "results")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        corpora = {
            "examples": _files(HERE.parent / "examples"),
            f"docs-tree-{args.files}": _files(docs_tree.write_tree(Path(tmp), args.files)),
        }
        for name, files in corpora.items():
            size = sum(len(d) for _, d in files)
            ours = _time(_clawkb(files), args.repeats)
            peer = _time(_peer(files), args.repeats)
            rows.append(
                {
                    "corpus": name,
                    "files": len(files),
                    "bytes": size,
                    "clawkb_s": round(ours, 4),
                    "markdown_it_full_s": round(peer, 4),
                    "clawkb_files_per_s": round(len(files) / ours, 1),
                    "clawkb_mb_per_s": round(size / ours / 1e6, 2),
                    "ratio_clawkb_over_peer": round(ours / peer, 2),
                }
            )
    print("| corpus | files | KB | clawkb s | files/s | MB/s | markdown-it full s | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['corpus']} | {r['files']} | {r['bytes'] // 1024} | {r['clawkb_s']} "
            f"| {r['clawkb_files_per_s']} | {r['clawkb_mb_per_s']} "
            f"| {r['markdown_it_full_s']} | {r['ratio_clawkb_over_peer']} |"
        )
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / f"markdown-{dt.date.today().isoformat()}.json"
    out.write_text(json.dumps({"repeats": args.repeats, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
