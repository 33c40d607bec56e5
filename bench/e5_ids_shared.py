"""e5 token ids on the shared datasets: `tokenizers` and the piece table vs the oracle.

    .venv/bin/python bench/e5_ids_shared.py [--datasets DIR]

Every document (``passage: title\\ntext``) of the four shared sets through the
``tokenizers`` build, every query (``query: ...``) through both the
``tokenizers`` build and the piece table, each compared with the Python port
of the engine's tokenizer (``tests/e5_unigram_oracle.py``). Prints the counts
and the mismatches (expected: none).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from shared_data import add_datasets_flag, datasets_dir

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
NAMES = ("cranfield", "agentset-msmarco", "cmrc2018-dev", "qbqtc-dev")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_datasets_flag(ap)
    args = ap.parse_args()
    data = datasets_dir(args.datasets)
    from clawkb.embed.e5 import E5Small
    from e5_unigram_oracle import UnigramTokenizer

    e5 = E5Small(workers=1)
    oracle = UnigramTokenizer(e5.img.vocab)
    bad_total = 0
    for name in NAMES:
        rows = [json.loads(line) for line in (data / name / "corpus.jsonl").open()]
        docs = [f"passage: {r.get('title', '')}\n{r['text']}" for r in rows]
        qs = [
            f"query: {json.loads(line)['text']}" for line in (data / name / "queries.jsonl").open()
        ]
        got = e5.tok.encode_batch(docs)
        bad_docs = sum(ids != oracle.encode(t) for t, ids in zip(docs, got, strict=True))
        want_q = [oracle.encode(q) for q in qs]
        bad_hf = sum(a != b for a, b in zip(e5.tok.encode_batch(qs), want_q, strict=True))
        bad_pt = sum(e5.query_tok.encode(q) != w for q, w in zip(qs, want_q, strict=True))
        bad_total += bad_docs + bad_hf + bad_pt
        print(
            f"{name}: {len(docs)} documents, {sum(map(len, got))} tokens, {bad_docs} differ;"
            f" {len(qs)} queries, {bad_hf} differ (tokenizers), {bad_pt} differ (piece table)",
            flush=True,
        )
    return 1 if bad_total else 0


if __name__ == "__main__":
    sys.exit(main())
