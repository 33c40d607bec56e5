"""Heading-match stage A/B, lexical, on esp-idf-docs (all pages): section titles and golden.tsv.

    nice -n 10 .venv/bin/python bench/headings_ab.py --cache DIR

Builds (once) a lexical-only KB per language tree under ``--cache``, then
reports with the stage off and on: (a) the share of en section titles whose
lexical top hit is a section with that title (bench/formats_trees.py's
measure), per dev / held-out half; (b) hit@3 per golden.tsv kind, per half.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engdocs import KIND_TREE, KINDS, TREES, golden, half, rank_of
from formats_trees import _same, source_titles
from shared_data import add_datasets_flag, datasets_dir


def build(tree: Path, home: Path):
    from clawkb.kb import KnowledgeBase

    done = (home / "DONE").exists()
    kb = KnowledgeBase.open(home, create=True)
    if not done:
        kb.index([tree])
        (home / "DONE").write_text("ok\n")
    return kb


def titles_score(kb, tree: Path, on: bool) -> dict[str, float]:
    titles = source_titles(tree)
    files_with: dict[str, set[str]] = {}
    for path, title in titles:
        files_with.setdefault(title.casefold(), set()).add(path)
    acc: dict[str, list[int]] = {"dev": [], "held": [], "all": []}
    starts: list[int] = []
    for _path, title in titles:
        hits = kb.search(title, mode="lexical", limit=10, snippets=False,
                         headings=on).hits  # fmt: skip
        first = hits[0] if hits else None
        ok = (
            bool(first)
            and bool(first.anchor.heading_path)
            and _same(first.anchor.heading_path[-1], title)
            and first.anchor.path in files_with[title.casefold()]
        )
        st = ok or (
            bool(first)
            and first.anchor.path in files_with[title.casefold()]
            and any(_same(h, title) for h in first.anchor.heading_path)
            and _same(first.text.split("\n", 1)[0], title)
        )
        for h in (half(title), "all"):
            acc[h].append(int(ok))
        starts.append(int(st))
    out = {h: round(sum(v) / len(v), 4) for h, v in acc.items()}
    out["start_all"] = round(sum(starts) / len(starts), 4)
    out["n"] = len(titles)
    return out


def golden_score(kbs, rows, on: bool) -> dict[str, dict[str, float]]:
    acc: dict[str, dict[str, list[int | None]]] = {}
    for r in rows:
        kb = kbs[KIND_TREE[r["kind"]]]
        res = kb.search(r["query"], mode="lexical", limit=20, snippets=False,
                        headings=on)  # fmt: skip
        seen: list[str] = []
        for h in res.hits:
            if h.anchor.path not in seen:
                seen.append(h.anchor.path)
        rk = rank_of(seen, r["expect"])
        for h in (half(r["query"]), "all"):
            acc.setdefault(r["kind"], {}).setdefault(h, []).append(rk)
    return {k: {h: round(sum(1 for x in v if x and x <= 3) / len(v), 4) for h, v in hs.items()}
            for k, hs in acc.items()}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", required=True)
    ap.add_argument("--skip-titles", action="store_true")
    add_datasets_flag(ap)
    a = ap.parse_args()
    data = datasets_dir(a.datasets)
    cache = Path(a.cache)
    kbs = {
        lang: build(data / "esp-idf-docs" / d, cache / f"lex-{lang}") for lang, d in TREES.items()
    }
    rows = golden(data)
    res = {}
    for on in (False, True):
        g = golden_score(kbs, rows, on)
        print("headings", on, json.dumps({k: g[k] for k in KINDS if k in g}), flush=True)
        res[f"golden_{on}"] = g
    if not a.skip_titles:
        for on in (False, True):
            t = titles_score(kbs["en"], data / "esp-idf-docs" / "en", on)
            print("titles headings", on, json.dumps(t), flush=True)
            res[f"titles_{on}"] = t
    print(json.dumps(res))


if __name__ == "__main__":
    main()
