"""Dump every bench query's top-10 (chunk ids, scores) from a knowledge base, to
check that an index change keeps the ranking identical.

Build the same corpus into a KB with each tree, then run with each tree on
``PYTHONPATH`` and compare the JSON files (they must be equal)::

    PYTHONPATH=<old tree>/src .venv/bin/python bench/ranking_dump.py KB_OLD CORPUS old.json
    .venv/bin/python bench/ranking_dump.py KB_NEW CORPUS new.json
    cmp old.json new.json

``CORPUS`` is a ``bench/.cache/synth-*`` folder (``queries.jsonl``). Besides
``kb.search_ids`` it records, for the first 200 queries, a one-term search
(the exhaustive path) and an exhaustive multi-term search (``prune=False``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from clawkb.kb import KnowledgeBase
from clawkb.text.tokenize import tokenize


def main(argv: list[str]) -> int:
    kb_dir, corpus, out = argv
    with open(Path(corpus) / "queries.jsonl", encoding="utf-8") as fh:
        queries = [json.loads(line)["text"] for line in fh if line.strip()]
    res: list[list] = []
    other: list[list] = []
    with KnowledgeBase.open(kb_dir) as kb:
        for q in queries:
            ids, scores = kb.search_ids(q, limit=10)
            res.append([[int(i) for i in ids], [float(s) for s in scores]])
        for q in queries[:200]:
            for terms, prune in ((tokenize(q)[:1], True), (tokenize(q), False)):
                ids, scores, matched = kb.lexical.search(terms, k=10, prune=prune)
                other.append([[int(i) for i in ids], [float(s) for s in scores], int(matched)])
    Path(out).write_text(json.dumps({"search_ids": res, "lexical": other}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
