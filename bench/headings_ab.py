"""Heading-match stage: off, and on at each match floor, lexical, on esp-idf-docs (all pages).

    nice -n 10 .venv/bin/python bench/headings_ab.py --cache DIR [--floors 0,0.6,0.8]

Builds (once) a lexical-only KB per language tree under ``--cache``, then
reports, with the stage off and with it on at each floor of ``--floors``
(``retrieval.headings_floor``: both coverages of the query/heading match must
reach it before a passage is lifted): (a) the share of section titles whose
lexical top hit is a section with that title (bench/formats_trees.py's measure),
per dev / held-out half (a stable hash of the title text), for the ``en`` tree
and, when its titles are found, ``zh_CN``; (b) hit@3 per golden.tsv kind, per
half. Fit the floor on ``dev``, read ``held``. ``--out FILE`` writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engdocs import KIND_TREE, KINDS, TREES, golden, half, rank_of
from formats_trees import _same, source_titles
from shared_data import add_datasets_flag, datasets_dir


def build(tree: Path, home: Path) -> Any:
    from clawkb.kb import KnowledgeBase

    done = (home / "DONE").exists()
    kb = KnowledgeBase.open(home, create=True)
    if not done:
        kb.index([tree])
        (home / "DONE").write_text("ok\n")
    return kb


def setting(floor: float | None) -> dict[str, Any]:
    """Search options: the stage off (None) or on at ``floor``."""
    return {"headings": False} if floor is None else {"headings": True, "headings_floor": floor}


def titles_score(kb: Any, titles: list[tuple[str, str]], opts: dict[str, Any]) -> dict[str, Any]:
    files_with: dict[str, set[str]] = {}
    for path, title in titles:
        files_with.setdefault(title.casefold(), set()).add(path)
    acc: dict[str, list[int]] = {"dev": [], "held": [], "all": []}
    for _path, title in titles:
        hits = kb.search(title, mode="lexical", limit=10, snippets=False, **opts).hits
        first = hits[0] if hits else None
        ok = (
            first is not None
            and bool(first.anchor.heading_path)
            and _same(first.anchor.heading_path[-1], title)
            and first.anchor.path in files_with[title.casefold()]
        )
        for h in (half(title), "all"):
            acc[h].append(int(ok))
    out: dict[str, Any] = {h: round(sum(v) / len(v), 4) for h, v in acc.items() if v}
    out["n"] = {h: len(v) for h, v in acc.items()}
    return out


def golden_score(kbs: dict[str, Any], rows: list[dict[str, str]], opts: dict[str, Any]) -> Any:
    acc: dict[str, dict[str, list[int | None]]] = {}
    for r in rows:
        kb = kbs[KIND_TREE[r["kind"]]]
        res = kb.search(r["query"], mode="lexical", limit=20, snippets=False, **opts)
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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", required=True)
    ap.add_argument("--floors", default="0,0.8", help="comma list of headings_floor values")
    ap.add_argument("--skip-titles", action="store_true")
    ap.add_argument("--skip-golden", action="store_true")
    ap.add_argument("--no-off", action="store_true", help="do not score the stage off")
    ap.add_argument("--langs", default="en,zh", help="title trees to score (en,zh)")
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    add_datasets_flag(ap)
    a = ap.parse_args()
    data = datasets_dir(a.datasets)
    cache = Path(a.cache)
    kbs = {
        lang: build(data / "esp-idf-docs" / d, cache / f"lex-{lang}") for lang, d in TREES.items()
    }
    floors: list[float | None] = [] if a.no_off else [None]
    floors += [float(x) for x in a.floors.split(",") if x]
    res: dict[str, Any] = {}
    for floor in floors:
        name = "off" if floor is None else f"floor={floor:g}"
        row: dict[str, Any] = {}
        if not a.skip_golden:
            g = golden_score(kbs, golden(data), setting(floor))
            row["golden"] = {k: g[k] for k in KINDS if k in g}
        if not a.skip_titles:
            for lang in (x for x in a.langs.split(",") if x):
                titles = source_titles(data / "esp-idf-docs" / TREES[lang])
                if titles:
                    row[f"titles_{lang}"] = titles_score(kbs[lang], titles, setting(floor))
        print(name, json.dumps(row), flush=True)
        res[name] = row
    if a.out:
        a.out.write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
