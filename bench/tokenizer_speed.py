"""Tokenizer speed: the native hot path against the Python reference, same texts.

    .venv/bin/python bench/tokenizer_speed.py [--docs 20000] [--repeats 3]

Uses the synthetic bilingual corpus of the lexical bench (bench/synth.py,
seed 13, generated in memory). Each implementation starts with an empty run
cache; the best of ``--repeats`` passes is reported, in MB of UTF-8 text per
second and tokens per second, plus the speed-up.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synth

tok = importlib.import_module("clawkb.text.tokenize")


def best_time(fn: Callable[[str], list[str]], texts: list[str], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        tok._CACHE.clear()
        t0 = time.perf_counter()
        for text in texts:
            fn(text)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    texts, _ = synth.generate(args.docs, n_queries=1, seed=13)
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    n_tokens = sum(len(tok.tokenize_python(t)) for t in texts)
    rows = [("python", tok.tokenize_python)]
    if tok.NATIVE_TOKENIZER:
        rows.append(("native", tok.tokenize))
    times = {}
    for name, fn in rows:
        times[name] = best_time(fn, texts, args.repeats)
        s = times[name]
        print(f"{name:7s} {s:6.2f} s  {mb / s:6.2f} MB/s  {n_tokens / s / 1e6:5.2f} M tokens/s")
    if "native" in times:
        print(
            f"speed-up {times['python'] / times['native']:.2f}x ({len(texts):,} docs, {mb:.1f} MB)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
