"""Dump the top-10 (anchor, score) of ``kb.search`` over the shared sets and the
examples, locally and on Milvus Lite, to check that a change of the read path
keeps every ranking identical.

Builds the knowledge bases once under ``WORK`` (kept between runs, so a dump
before and after a change searches the same stores and collections), then
writes one JSON file. Run it with each tree and compare the files::

    PYTHONPATH=<old tree>/src .venv/bin/python tools/search_dump.py WORK old.json
    .venv/bin/python tools/search_dump.py WORK new.json
    cmp old.json new.json

KBs per dataset: ``local`` (the store and its segments), ``milvus`` (the same
corpus with a Milvus Lite backend, client-side fusion), and two remote-only
folders on that collection (``remote``: client-side fusion, ``server``:
``fuse: server``). Vectors come from the ``static`` embedder (cheap; the
comparison needs the same vectors on both sides, not good ones).

For a change of the lexical index, ``--synth KB CORPUS`` dumps only the raw
lexical top-10 of a KB built from a synthetic corpus (``bench/.cache/synth-*``,
``queries.jsonl``; build the same corpus into a KB with each tree)::

    PYTHONPATH=<old tree>/src .venv/bin/python tools/search_dump.py --synth KB_OLD CORPUS - old.json
    .venv/bin/python tools/search_dump.py --synth KB_NEW CORPUS - new.json

Besides ``kb.search_ids`` it records, for the first 200 queries, a one-term search
(the exhaustive path) and an exhaustive multi-term search (``prune=False``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SETS = ("cranfield", "cmrc2018-dev", "agentset-msmarco", "qbqtc-dev")
MODES = ("lexical", "hybrid", "dense")


def _write_config(home: Path, name: str, conf: dict[str, Any]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / name).write_text(yaml.safe_dump(conf), encoding="utf-8")


def _homes(work: Path, tag: str) -> dict[str, Path]:
    lite = str(work / f"{tag}-milvus" / "lite.db")
    backend = {"kind": "milvus", "uri": lite, "collection": "dump", "dense": True, "batch": 1000}
    homes = {
        "local": work / f"{tag}-local",
        "milvus": work / f"{tag}-milvus",
        "remote": work / f"{tag}-remote",
        "server": work / f"{tag}-server",
    }
    _write_config(homes["local"], "config.yaml", {"embedding": "static"})
    _write_config(homes["milvus"], "config.yaml", {"embedding": "static", "backend": backend})
    _write_config(homes["remote"], "remote.yaml", {"embedding": "static", "backend": backend})
    _write_config(
        homes["server"],
        "remote.yaml",
        {"embedding": "static", "backend": {**backend, "fuse": "server"}},
    )
    return homes


def _build(home: Path, fill: Any) -> None:
    from clawkb.embed.run import embed_kb
    from clawkb.kb import KnowledgeBase

    if (home / "built").exists():
        return
    with KnowledgeBase.open(home, create=True) as kb:
        fill(kb)
        embed_kb(kb)
        if kb.config.backend not in (None, "local"):
            from clawkb.backends.milvus_kb import sync_kb

            sync_kb(kb)
    (home / "built").write_text("ok\n")


def _close_lite(home: Path) -> None:
    from clawkb.backends.milvus_schema import close_client
    from clawkb.backends.settings import backend_settings
    from clawkb.config import Config

    conf = Config.load(home) if (home / "config.yaml").exists() else None
    if conf is None:
        data = yaml.safe_load((home / "remote.yaml").read_text(encoding="utf-8"))
        conf = Config.from_dict(data, str(home / "remote.yaml"))
    s = backend_settings(conf.backend, home)
    if s is not None:
        from clawkb.backends.milvus_kb import forget

        close_client(s)
        forget(s)  # the next client loads the collection again


def _dump(home: Path, runs: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    from clawkb.kb import KnowledgeBase

    out: list[Any] = []
    with KnowledgeBase.open(home) as kb:
        for text, kwargs in runs:
            res = kb.search(text, limit=10, **kwargs)
            out.append([text, kwargs, res.mode, [[h.anchor.id, h.score] for h in res.hits]])
    _close_lite(home)
    return out


def dataset_runs(folder: Path, n_queries: int, n_docs: int, work: Path) -> dict[str, Any]:
    from clawkb.evaluate.beir import load_beir
    from clawkb.kb import TextRecord

    ds = load_beir(folder)
    records = [TextRecord(path=d.id, text=d.text, title=d.title) for d in ds.docs[:n_docs]]
    homes = _homes(work, folder.name)
    for side in ("local", "milvus"):
        _build(homes[side], lambda kb: kb.index_texts(records))
        _close_lite(homes[side])
    runs = [(q.text, {"mode": m}) for q in ds.queries[:n_queries] for m in MODES]
    return {side: _dump(home, runs) for side, home in homes.items()}


def example_runs(work: Path) -> dict[str, Any]:
    from clawkb.hardware import index_datasheets

    ex = ROOT / "examples"
    homes = _homes(work, "examples")

    def fill(kb: Any) -> None:
        index_datasheets(kb, [ex / "notes"], [ex / "datasheets"])

    for side in ("local", "milvus"):
        _build(homes[side], fill)
        _close_lite(homes[side])
    golden = yaml.safe_load((ex / "golden.yaml").read_text(encoding="utf-8"))["queries"]
    hard = yaml.safe_load((ex / "hardware-golden.yaml").read_text(encoding="utf-8"))["queries"]
    asks = yaml.safe_load((ex / "questions.yaml").read_text(encoding="utf-8"))["questions"]
    runs = [(g["query"], {"mode": m}) for g in golden for m in MODES]
    runs += [(a["question"], {"mode": "hybrid"}) for a in asks]
    boards = [(h["query"], {"mode": m}) for h in hard for m in ("lexical", "hybrid")]
    runs += boards
    board_runs = [
        (
            h["query"],
            {
                "mode": m,
                "boards": [h["board"]] if isinstance(h["board"], str) else h["board"],
                "board_only": only,
            },
        )
        for h in hard
        if h.get("board")
        for m in ("lexical", "hybrid")
        for only in (False, True)
    ]
    out = {side: _dump(home, runs) for side, home in homes.items()}
    # board names live in the ingesting machine's store
    out["local-boards"] = _dump(homes["local"], board_runs)
    out["milvus-boards"] = _dump(homes["milvus"], board_runs)
    return out


def synth_runs(kb_dir: Path, corpus: Path) -> dict[str, Any]:
    """The raw lexical top-10 (chunk ids, scores) of every synthetic-corpus query."""
    from clawkb.kb import KnowledgeBase
    from clawkb.text.tokenize import tokenize

    with open(corpus / "queries.jsonl", encoding="utf-8") as fh:
        queries = [json.loads(line)["text"] for line in fh if line.strip()]
    res: list[list[Any]] = []
    other: list[list[Any]] = []
    with KnowledgeBase.open(kb_dir) as kb:
        for q in queries:
            ids, scores = kb.search_ids(q, limit=10)
            res.append([[int(i) for i in ids], [float(s) for s in scores]])
        for q in queries[:200]:
            for terms, prune in ((tokenize(q)[:1], True), (tokenize(q), False)):
                ids, scores, matched = kb.lexical.search(terms, k=10, prune=prune)
                other.append([[int(i) for i in ids], [float(s) for s in scores], int(matched)])
    return {"search_ids": res, "lexical": other}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", type=Path, help="folder of the built KBs (`-` with --synth)")
    ap.add_argument("out", type=Path)
    ap.add_argument("--datasets", type=Path, default=ROOT.parent / "shared" / "datasets")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--docs", type=int, default=3000)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument(
        "--synth", nargs=2, type=Path, metavar=("KB", "CORPUS"),
        help="dump only the raw lexical top-10 of KB, built from the synthetic CORPUS",
    )  # fmt: skip
    a = ap.parse_args(argv)
    if a.synth:
        a.out.write_text(json.dumps(synth_runs(*a.synth)) + "\n")
        return 0
    a.work.mkdir(parents=True, exist_ok=True)
    dump: dict[str, Any] = {"examples": example_runs(a.work)}
    for name in a.sets.split(","):
        folder = a.datasets / name
        if folder.is_dir():
            dump[name] = dataset_runs(folder, a.queries, a.docs, a.work)
            print(name, "done", file=sys.stderr, flush=True)
    a.out.write_text(json.dumps(dump, ensure_ascii=False, indent=0, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
