"""Overhead of `ask` excluding the LLM call, at ~10k chunks (target <= 30 ms).

Builds (or reuses) a KB of synthetic bilingual documents from bench/synth.py
via ``kb.index_texts`` until it holds at least ``--chunks`` chunks, then runs
the generator's queries through ``clawkb.answer.answer`` twice:

* LLM mode with an in-process client that returns at once (so the measured
  ``overhead`` = retrieval + confidence + context + prompt rendering +
  citation check, and nothing of a model or of HTTP);
* extractive mode (no LLM), whose total is all overhead.

    .venv/bin/python bench/ask_overhead.py [--chunks 10000] [--queries 300]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clawkb.answer import answer
from clawkb.kb import KnowledgeBase, TextRecord
from clawkb.llm import ChatReply, Message, TokenSink
from synth import generate


class InstantClient:
    """A model that answers instantly, citing the first passage."""

    name = "instant"

    def chat(self, messages: Sequence[Message], *, on_token: TokenSink | None = None) -> ChatReply:
        return ChatReply("See the first passage [1].", self.name)


def build(home: Path, chunks: int) -> tuple[int, int]:
    """Index synthetic docs until ``chunks`` are stored; returns (docs, chunks)."""
    with KnowledgeBase.open(home, create=True) as kb:
        n_docs = 2000
        while True:
            texts, _ = generate(n_docs, 0)
            kb.index_texts(TextRecord(f"doc{i:06d}.md", t) for i, t in enumerate(texts))
            have = kb.repo.counts()["chunks"]
            if have >= chunks:
                return n_docs, have
            n_docs = int(n_docs * chunks / max(have, 1) * 1.05) + 1


def stats(values: list[float]) -> dict[str, float]:
    a = np.asarray(values)
    return {
        "median_ms": round(float(np.median(a)), 2),
        "p95_ms": round(float(np.percentile(a, 95)), 2),
        "max_ms": round(float(a.max()), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=10000)
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "kb"
        n_docs, n_chunks = build(home, args.chunks)
        _, queries = generate(n_docs, args.queries + 20)
        client = InstantClient()
        with KnowledgeBase.open(home) as kb:
            for q in queries[:20]:  # warm caches, templates, regexes
                answer(kb, q.text, llm=client)
            llm_over, extractive, abstained = [], [], 0
            for q in queries[20:]:
                res = answer(kb, q.text, llm=client)
                llm_over.append(res.timings["overhead"])
                ext = answer(kb, q.text, llm="none")
                extractive.append(ext.timings["total"])
                abstained += ext.abstained
    report = {
        "chunks": n_chunks,
        "queries": len(llm_over),
        "llm_mode_overhead": stats(llm_over),
        "extractive_total": stats(extractive),
        "abstained": abstained,
        "target_ms": 30,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
