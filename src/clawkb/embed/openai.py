"""``openai``: any OpenAI-compatible ``/embeddings`` endpoint (Ollama, vLLM, TEI, ...).

Used for models too large to ship (bge-m3 class). The endpoint is called in
batches through :func:`clawkb.endpoint.post_json` (httpx): 429 and 5xx answers
are retried, honouring ``Retry-After``; anything else is a clear error naming
the URL.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from clawkb.embed.base import Embedder, l2_normalize
from clawkb.endpoint import EndpointError, post_json
from clawkb.errors import ConfigError

if TYPE_CHECKING:
    from clawkb.types import JSON

__all__ = ["EndpointError", "OpenAIEmbedder", "post_json"]


class OpenAIEmbedder(Embedder):
    prefix = "none"
    normalized = True

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:11434/v1",
        model: str = "bge-m3",
        api_key_env: str = "OPENAI_API_KEY",
        dim: int | None = None,
        batch_size: int = 64,
        timeout: float = 60.0,
        query_prefix: str = "",
        passage_prefix: str = "",
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"embedding base_url must start with http:// or https://: {base_url!r}"
            )
        if batch_size < 1:
            raise ConfigError(f"embedding batch_size must be >= 1, got {batch_size}")
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self.name = f"openai:{model}"
        self.api_key = os.environ.get(api_key_env, "")
        self.batch_size = batch_size
        self.timeout = timeout
        self.query_prefix, self.passage_prefix = query_prefix, passage_prefix
        if query_prefix or passage_prefix:
            self.prefix = f"{query_prefix!r}/{passage_prefix!r}"
        self._dim = dim

    @property
    def dim(self) -> int:  # type: ignore[override]
        """Known from config, else learnt from one probe call."""
        if self._dim is None:
            self._dim = int(self._call(["dimension probe"]).shape[1])
        return self._dim

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        parts = [
            self._call([self.passage_prefix + t for t in texts[i : i + self.batch_size]])
            for i in range(0, len(texts), self.batch_size)
        ]
        return np.vstack(parts) if parts else np.zeros((0, self.dim), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._call([self.query_prefix + text])[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return self._call([self.query_prefix + t for t in texts])

    def _call(self, inputs: list[str]) -> np.ndarray:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        data = post_json(self.url, {"model": self.model, "input": inputs}, headers, self.timeout)
        try:
            items = data.get("data") if isinstance(data, Mapping) else None
            if not isinstance(items, list):
                raise TypeError("no list under 'data'")
            rows = [d for d in items if isinstance(d, Mapping)]
            if len(rows) != len(items):
                raise TypeError("an item of 'data' is not an object")
            rows.sort(key=_position)
            vecs = np.asarray([r["embedding"] for r in rows], np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise EndpointError(f"{self.url}: unexpected answer shape ({exc})") from exc
        if vecs.ndim != 2 or len(vecs) != len(inputs):
            raise EndpointError(f"{self.url}: asked for {len(inputs)} embeddings, got {len(vecs)}")
        if self._dim is not None and vecs.shape[1] != self._dim:
            raise EndpointError(
                f"{self.url}: model {self.model!r} returned {vecs.shape[1]}-d vectors,"
                f" configured dim is {self._dim}"
            )
        return l2_normalize(vecs)


def _position(item: Mapping[str, JSON]) -> int:
    """An embedding's place in the answer (``index``; the answer's order without one)."""
    index = item.get("index", 0)
    return index if isinstance(index, int) else 0
