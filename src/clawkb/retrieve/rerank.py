"""Rerank stage: re-score the top candidates with a stronger (slower) model.

Built-ins: ``dense`` re-scores with the embedder (works before any vectors
are stored), ``endpoint`` calls a rerank service (``/rerank`` of TEI, vLLM,
Jina or Cohere shape), ``onnx`` runs a cross-encoder the user keeps in a
folder (``model.onnx`` + ``tokenizer.json``). Scores below
``rerank_min_score`` drop the passage.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from clawkb.embed.base import Embedder
from clawkb.errors import ConfigError, MissingDependencyError


class Reranker(ABC):
    name = ""

    @abstractmethod
    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """One relevance score per text (higher is better)."""


class DenseRescorer(Reranker):
    name = "dense"

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        q = self.embedder.embed_query(query)
        return np.asarray(self.embedder.embed_documents(list(texts)) @ q, np.float32)


class EndpointReranker(Reranker):
    """POST ``{base_url}/rerank``; accepts ``results[].relevance_score`` or ``[].score``."""

    name = "endpoint"

    def __init__(
        self,
        base_url: str,
        model: str = "",
        api_key_env: str = "RERANK_API_KEY",
        timeout: float = 30.0,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"rerank base_url must start with http:// or https://: {base_url!r}")
        self.url = base_url.rstrip("/") + "/rerank"
        self.model, self.timeout = model, timeout
        self.api_key = os.environ.get(api_key_env, "")

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        from clawkb.embed.openai import EndpointError, post_json

        payload: dict[str, Any] = {"query": query, "documents": list(texts), "texts": list(texts)}
        if self.model:
            payload["model"] = self.model
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        data = post_json(self.url, payload, headers, self.timeout)
        rows = data.get("results", data) if isinstance(data, Mapping) else data
        out = np.full(len(texts), -np.inf, np.float32)
        try:
            if not isinstance(rows, list):
                raise TypeError("no list of results")
            for r in rows:
                if not isinstance(r, Mapping):
                    raise TypeError(f"a result is not an object: {r!r}")
                index, score = r["index"], r.get("relevance_score", r.get("score"))
                if not isinstance(index, int | str) or not isinstance(score, int | float | str):
                    raise TypeError(f"a result without a numeric index and score: {r!r}")
                out[int(index)] = float(score)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise EndpointError(f"{self.url}: unexpected rerank answer ({exc})") from exc
        return out


class OnnxCrossEncoder(Reranker):
    """A cross-encoder exported to ONNX in ``folder`` (``model.onnx``, ``tokenizer.json``)."""

    name = "onnx"

    def __init__(self, folder: str, max_length: int = 512) -> None:
        path = Path(folder).expanduser()
        for need in ("model.onnx", "tokenizer.json"):
            if not (path / need).is_file():
                raise ConfigError(f"rerank folder {path}: missing {need}")
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError:
            raise MissingDependencyError("the ONNX cross-encoder reranker", "rerank") from None
        self.tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tok.enable_truncation(max_length)
        self.tok.enable_padding()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        self.session = ort.InferenceSession(str(path / "model.onnx"), opts)
        self.inputs = {i.name for i in self.session.get_inputs()}

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        enc = self.tok.encode_batch([(query, t) for t in texts])
        feed = {
            "input_ids": np.array([e.ids for e in enc], np.int64),
            "attention_mask": np.array([e.attention_mask for e in enc], np.int64),
            "token_type_ids": np.array([e.type_ids for e in enc], np.int64),
        }
        (logits,) = self.session.run(None, {k: v for k, v in feed.items() if k in self.inputs})[:1]
        logits = np.asarray(logits, np.float32)
        return logits[:, -1] if logits.ndim == 2 else logits.reshape(-1)


def dense(options: Mapping[str, Any], embedder: Embedder | None) -> Reranker:
    if embedder is None:
        raise ConfigError("rerank = dense needs an embedder (config `embedding:`)")
    return DenseRescorer(embedder, **options)


def endpoint(options: Mapping[str, Any], embedder: Embedder | None) -> Reranker:
    if "base_url" not in options:
        raise ConfigError("rerank = endpoint needs `retrieval.rerank_options.base_url`")
    return EndpointReranker(**options)


def onnx(options: Mapping[str, Any], embedder: Embedder | None) -> Reranker:
    if "folder" not in options:
        raise ConfigError("rerank = onnx needs `retrieval.rerank_options.folder`")
    return OnnxCrossEncoder(**options)


#: What a ``clawkb.rerankers`` plugin is: ``factory(options, embedder) -> Reranker``.
RerankerFactory = Callable[[dict[str, Any], Embedder | None], Reranker]


def make_reranker(kind: str, options: Mapping[str, Any], embedder: Embedder | None) -> Reranker:
    """Reranker ``kind``: a factory in the ``clawkb.rerankers`` entry-point group."""
    from clawkb.plugins import load_plugin

    # the group's contract (docs/plugins.md)
    factory = cast(RerankerFactory, load_plugin("clawkb.rerankers", kind, what="reranker"))
    try:
        reranker = factory(dict(options), embedder)
    except TypeError as exc:
        raise ConfigError(f"reranker {kind!r}: bad options {sorted(options)} ({exc})") from exc
    return reranker
