"""``static``: the 64-d static (Model2Vec-style) model shipped in ``tokenlearn-static-model``.

Thousands of texts per second and weak quality: a fallback for huge corpora
or slow machines. Queries and passages are embedded the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from clawkb.embed.base import Embedder, l2_normalize
from clawkb.errors import MissingDependencyError

#: Longest input, in the model's tokens, the encoder reads per text.
MAX_TOKENS = 512
#: Whether this process has loaded the model (the extension keeps one per process).
_loaded = False


class StaticEmbedder(Embedder):
    name = "static"
    dim = 64
    prefix = "none"
    normalized = True

    def __init__(self) -> None:
        try:
            import static_model
            from static_model import _static_model
        except ImportError:
            raise MissingDependencyError("the static embedder", "dense") from None
        self._encode: Callable[..., np.ndarray] = _static_model.encode_batch
        self._dir = str(Path(static_model.__file__).resolve().parent / "model")

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        rows = self._encode(self._dir, [str(t) for t in texts], MAX_TOKENS)
        return l2_normalize(np.asarray(rows, np.float32).reshape(len(texts), self.dim))

    def warm(self) -> None:
        """Load the model (the first call's cost: about a second of CPU, GIL held);
        the extension keeps it for the process, so once is enough."""
        global _loaded
        if not _loaded:
            self.embed_documents(["warm"])
            _loaded = True

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_documents(texts)
