"""Index real documentation trees and measure what the new format parsers give.

    .venv/bin/python bench/formats_trees.py --rst ../shared/datasets/esp-idf-docs/en
    .venv/bin/python bench/formats_trees.py --debian /usr/share/doc
    .venv/bin/python bench/formats_trees.py --rst DIR --debian DIR   # both

* ``--rst DIR`` (a Sphinx tree): every section title of every ``.rst`` file,
  found by an independent scan of the source (a text line underlined by a
  punctuation line at least as long, roles reduced to their text), is
  searched lexically; a title counts when the top hit's heading path ends in
  that title and the hit is in a file that has a section with that title
  (titles such as "Overview" live in many files; no query can name the file).
  Also reported: the strict own-file rate and hit@5, and the top-1 rate per
  dev / held-out half (a stable hash of the title; ``retrieval.headings_floor``
  was fitted on the dev half). Every measure is taken on the same index with
  each of :data:`SETTINGS`: the heading-match stage off (before it had a match
  floor it was opt-in), as shipped by ``--mode lexical`` and by the default
  mode, and the stage without a floor; ``--misses FILE`` writes every miss as
  shipped (title, file, top hit's path and first words).
* ``--debian DIR`` (a Debian doc tree, ``/usr/share/doc``): files skipped for
  want of a parser, by kind (``.gz``, ``README.*``, other), and failures.

Both report index wall and CPU seconds (this process and its workers) and the
file/chunk counts. The results replace the "Document trees" section of
bench/results/formats-latest.md (the spreadsheet table above it is kept) and
are written to bench/results/formats-trees.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from shared_data import shown

HERE = Path(__file__).resolve().parent
SECTION_MARK = "## Document trees"
_ADORN = re.compile(r"^([=\-`:'\"~^_*+#<>.])\1{2,}\s*$")
_ROLE = re.compile(r":[\w:.+-]+:`([^`]*)`")
_EXPLICIT = re.compile(r"^(.*?)\s*<[^<>]*>$")
_LITERAL = re.compile(r"``([^`]*)``")


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _plain_title(raw: str) -> str:
    def role(m: re.Match[str]) -> str:
        inner = m.group(1)
        explicit = _EXPLICIT.match(inner)
        text = explicit.group(1) if explicit and explicit.group(1) else inner
        return text.lstrip("~!").split(".")[-1] if text.startswith("~") else text.lstrip("!")

    text = _LITERAL.sub(r"\1", _ROLE.sub(role, raw))
    text = re.sub(r"(?<![\w\\])[*]{1,2}([^*]+)[*]{1,2}", r"\1", text)
    text = text.replace("\\", "")
    return " ".join(text.split())


def source_titles(root: Path) -> list[tuple[str, str]]:
    """``(path, title)`` for each underlined section title in the ``.rst`` files."""
    out: list[tuple[str, str]] = []
    for path in sorted(root.rglob("*.rst")):
        lines = path.read_text("utf-8", "replace").split("\n")
        in_literal = False
        for i in range(1, len(lines)):
            title, under = lines[i - 1], lines[i]
            if title.rstrip().endswith("::"):
                in_literal = True
            if not title.strip() or title.startswith((" ", "\t", "..")):
                continue
            if in_literal and not title.startswith(" "):
                in_literal = False
            if _ADORN.match(under) and len(under.rstrip()) >= len(title.rstrip()):
                if _ADORN.match(title):
                    continue
                plain = _plain_title(title.strip())
                if plain:
                    out.append((path.resolve().as_posix(), plain))
    return out


def _same(heading: str, title: str) -> bool:
    return "".join(_plain_title(heading).split()).casefold() == "".join(title.split()).casefold()


def parser_coverage(titles: list[tuple[str, str]]) -> float:
    """Share of source titles the parser makes the last heading of a slice in their file."""
    from clawkb.parsers.rst import RstParser

    by_file: dict[str, list[str]] = {}
    for path, title in titles:
        by_file.setdefault(path, []).append(title)
    found = 0
    for path, wanted in by_file.items():
        doc = RstParser().parse(Path(path).read_bytes(), path)
        heads = [s.heading_path[-1] for s in doc.slices if s.heading_path]
        found += sum(any(_same(h, t) for h in heads) for t in wanted)
    return round(found / len(titles), 4) if titles else 0.0


def _index(folder: Path, home: Path) -> tuple[Any, dict[str, Any]]:
    from clawkb.kb import KnowledgeBase

    kb = KnowledgeBase.open(home, create=True)
    cpu0, t0 = _cpu(), time.perf_counter()
    report = kb.index([folder])
    timing = {
        "index_wall_s": round(time.perf_counter() - t0, 2),
        "index_cpu_s": round(_cpu() - cpu0, 2),
        "files_added": report.added,
        "failed": report.failed,
        "skipped": report.skipped,
        "chunks": report.chunks_added,
    }
    return kb, {"report": report, **timing}


#: The settings each title is searched with: (name, mode, retrieval options).
#: ``before``: the heading stage off (how it shipped until it got its match floor);
#: ``default`` / ``default mode``: as shipped, by ``--mode lexical`` and by the
#: default mode (auto: lexical on a KB without vectors); ``floor 0``: the stage
#: lifting any passage whose heading shares a word with the query (the old opt-in).
SETTINGS: tuple[tuple[str, str | None, dict[str, Any]], ...] = (
    ("before", "lexical", {"headings": False}),
    ("default", "lexical", {}),
    ("default mode", None, {}),
    ("floor 0", "lexical", {"headings": True, "headings_floor": 0.0}),
)


def half(text: str) -> str:
    """``dev`` or ``held``: a stable split by a hash of the title (bench/engdocs.py's)."""
    return "dev" if hashlib.sha1(text.encode()).digest()[0] % 2 == 0 else "held"


def _score_titles(
    kb: Any,
    sample: list[tuple[str, str]],
    files_with: dict[str, set[str]],
    by_title: Counter[str],
    mode: str | None,
    options: dict[str, Any],
    misses_out: list[dict[str, Any]] | None,
) -> dict[str, float]:
    """The title measures for one search setting."""
    ok = own = at5 = at10 = starts = 0
    uniq_n = uniq_ok = 0
    halves: dict[str, list[int]] = {"dev": [], "held": []}
    cpu0 = _cpu()
    for path, title in sample:
        key = title.casefold()
        hits = kb.search(title, mode=mode, limit=10, snippets=False, **options).hits
        good = [
            h
            for h in hits
            if h.anchor.heading_path
            and _same(h.anchor.heading_path[-1], title)
            and h.anchor.path in files_with[key]
        ]
        top = bool(hits) and bool(good) and good[0] is hits[0]
        halves[half(title)].append(int(top))
        # a chunk that starts with the title's line and holds it in its path
        # (how heading-only sections glued to a subsection used to be reported)
        first = hits[0] if hits else None
        starts += bool(first) and (
            top
            or (
                first.anchor.path in files_with[key]
                and any(_same(h, title) for h in first.anchor.heading_path)
                and _same(first.text.split("\n", 1)[0], title)
            )
        )
        ok += top
        own += top and hits[0].anchor.path == path
        at5 += any(h.anchor.path == path for h in good[:5] if h in hits[:5])
        at10 += any(h.anchor.path == path for h in good)
        if len(files_with[key]) == 1 and by_title[key] == 1:
            uniq_n += 1
            uniq_ok += top
        if not top and misses_out is not None:
            misses_out.append(
                {
                    "title": title,
                    "file": shown(path),
                    "top": None
                    if first is None
                    else [
                        shown(first.anchor.path),
                        list(first.anchor.heading_path),
                        first.text[:80],
                    ],
                }
            )
    n = len(sample)
    return {
        "cpu_ms_per_query": round((_cpu() - cpu0) * 1000 / n, 2) if n else 0.0,
        "top1": round(ok / n, 4) if n else 0.0,
        **{f"top1_{h}": round(sum(v) / len(v), 4) if v else 0.0 for h, v in halves.items()},
        "section_start": round(starts / n, 4) if n else 0.0,
        "own_file": round(own / n, 4) if n else 0.0,
        "own_at5": round(at5 / n, 4) if n else 0.0,
        "own_at10": round(at10 / n, 4) if n else 0.0,
        "unique_n": uniq_n,
        "unique_top1": round(uniq_ok / uniq_n, 4) if uniq_n else 0.0,
        **{f"n_{h}": len(v) for h, v in halves.items()},
    }


def bench_rst(folder: Path, limit: int | None, misses_file: Path | None) -> dict[str, Any]:
    titles = source_titles(folder)
    with tempfile.TemporaryDirectory() as tmp:
        kb, info = _index(folder, Path(tmp) / "kb")
        report = info.pop("report")
        files_with: dict[str, set[str]] = {}
        by_title: Counter[str] = Counter()
        for path, title in titles:
            files_with.setdefault(title.casefold(), set()).add(path)
            by_title[title.casefold()] += 1
        coverage = parser_coverage(titles)
        sample = titles if limit is None else titles[:limit]
        misses: list[dict[str, Any]] = []
        settings = {
            name: _score_titles(kb, sample, files_with, by_title, mode, opts,
                                misses if name == "default" else None)
            for name, mode, opts in SETTINGS
        }  # fmt: skip
        kb.close()
    if misses_file is not None:
        misses_file.write_text(json.dumps(misses, indent=1, ensure_ascii=False) + "\n")
    return {
        "folder": folder.name,
        "rst_files": len(list(folder.rglob("*.rst"))),
        "titles": len(sample),
        "settings": settings,
        "parser_title_coverage": coverage,
        "failed_files": [list(e) for e in report.errors[:20]],
        "misses": misses[:25],
        **info,
    }


def bench_debian(folder: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        kb, info = _index(folder, Path(tmp) / "kb")
        report = info.pop("report")
        kb.close()
    no_parser = [(p, r) for p, r in report.skipped_files if r.startswith("no parser")]
    gz = [p for p, _ in no_parser if p.endswith((".gz", ".bz2", ".xz"))]
    readme = [p for p, _ in no_parser if Path(p).name.upper().startswith("README")]
    reasons = Counter(r for _, r in report.skipped_files)
    failures = Counter(r.split(":")[0][:60] for _, r in report.errors)
    return {
        "folder": folder.as_posix(),
        "no_parser_gz": len(gz),
        "no_parser_readme": len(readme),
        "no_parser_total": len(no_parser),
        "skip_reasons": dict(reasons.most_common(12)),
        "failure_reasons": dict(failures.most_common(8)),
        "gz_examples": gz[:10],
        "failures": [[p, r[:160]] for p, r in report.errors[:20]],
        **info,
    }


def _rst_lines(r: dict[str, Any]) -> list[str]:
    cols = [name for name, _, _ in SETTINGS if name in r.get("settings", {})]
    st = r["settings"]

    def row(label: str, key: str) -> str:
        return f"| {label} | " + " | ".join(f"{st[c][key]:.1%}" for c in cols) + " |"

    d = st[cols[0]]
    return [
        f"Sphinx tree `{r['folder']}` ({r['rst_files']} `.rst` files, {r['titles']} section "
        "titles from a source scan), each title searched as typed. Columns: the heading "
        "stage off (`before`); as shipped, by `--mode lexical` (`default`) and by the "
        "default mode (`default mode`: auto, lexical on a KB without vectors); the stage "
        "lifting any heading that shares a word with the query (`floor 0`, the old opt-in).",
        "",
        "| measure | " + " | ".join(cols) + " |",
        "|---|" + "---:|" * len(cols),
        row("top hit is a section with that title (in a file that has it)", "top1"),
        row(f"… dev half ({d['n_dev']} titles, the floor was fitted here)", "top1_dev"),
        row(f"… held-out half ({d['n_held']} titles)", "top1_held"),
        row("… and in the title's own file", "own_file"),
        row("top hit starts with the title's line and holds it in its path", "section_start"),
        row(
            f"titles that occur once in the tree ({d['unique_n']}): top hit is that section",
            "unique_top1",
        ),
        row("own file's section in the top 5", "own_at5"),
        row("own file's section in the top 10", "own_at10"),
        "| CPU ms per search (this process) | "
        + " | ".join(f"{st[c]['cpu_ms_per_query']:.2f}" for c in cols)
        + " |",
        f"| parser: titles that end a heading path in their file | "
        f"{r['parser_title_coverage']:.1%} |" + " |" * (len(cols) - 1),
        f"| index wall / CPU seconds | {r['index_wall_s']} / {r['index_cpu_s']} |"
        + " |" * (len(cols) - 1),
        f"| files indexed / failed / skipped, chunks | {r['files_added']} / {r['failed']} / "
        f"{r['skipped']}, {r['chunks']} |" + " |" * (len(cols) - 1),
        "",
    ]


def _markdown(results: dict[str, Any]) -> list[str]:
    lines = [SECTION_MARK, ""]
    if "rst" in results and "settings" in results["rst"]:
        lines += _rst_lines(results["rst"])
    if "debian" in results:
        d = results["debian"]
        lines += [
            f"Debian doc tree `{d['folder']}`:",
            "",
            "| measure | value |",
            "|---|---:|",
            f"| `.gz`/`.bz2`/`.xz` skipped for want of a parser | {d['no_parser_gz']} |",
            f"| `README*` skipped for want of a parser | {d['no_parser_readme']} |",
            f"| all files skipped for want of a parser | {d['no_parser_total']} |",
            f"| index wall / CPU seconds | {d['index_wall_s']} / {d['index_cpu_s']} |",
            f"| files indexed / failed / skipped, chunks | {d['files_added']} / {d['failed']} / "
            f"{d['skipped']}, {d['chunks']} |",
            "",
            "Skip reasons: "
            + ", ".join(f"{k} ({v})" for k, v in d["skip_reasons"].items())
            + (
                "; failures: " + ", ".join(f"{k} ({v})" for k, v in d["failure_reasons"].items())
                if d["failure_reasons"]
                else ""
            ),
            "",
        ]
    return lines


def write_section(out_dir: Path, lines: list[str]) -> None:
    latest = out_dir / "formats-latest.md"
    old = latest.read_text("utf-8") if latest.exists() else ""
    keep = old.split(SECTION_MARK, 1)[0].rstrip("\n")
    latest.write_text((keep + "\n\n" if keep else "") + "\n".join(lines).rstrip() + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rst", type=Path, help="a Sphinx .rst tree (esp-idf-docs/en)")
    ap.add_argument("--debian", type=Path, help="a Debian doc tree (/usr/share/doc)")
    ap.add_argument("--limit", type=int, help="search only the first N titles")
    ap.add_argument("--misses", type=Path, help="write every default-mode miss to this JSON file")
    ap.add_argument("--out-dir", type=Path, default=HERE / "results")
    args = ap.parse_args()
    if not args.rst and not args.debian:
        ap.error("give --rst DIR and/or --debian DIR")
    results: dict[str, Any] = {}
    json_path = args.out_dir / "formats-trees.json"
    if json_path.exists():
        results = json.loads(json_path.read_text("utf-8"))
    if args.rst:
        if not args.rst.is_dir():
            raise SystemExit(f"{args.rst}: not a folder")
        results["rst"] = bench_rst(args.rst, args.limit, args.misses)
        print(json.dumps({k: v for k, v in results["rst"].items() if k != "misses"}, indent=1))
    if args.debian:
        if not args.debian.is_dir():
            raise SystemExit(f"{args.debian}: not a folder")
        results["debian"] = bench_debian(args.debian)
        print(json.dumps(results["debian"], indent=1))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    write_section(args.out_dir, _markdown(results))
    print("\n".join(_markdown(results)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
