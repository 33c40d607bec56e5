"""The search options every front end accepts (CLI flags, HTTP query parameters),
turned into ``kb.search`` keywords in one place.

Choices come from the settings and the plugin registry, so a reranker plugin is
accepted by the HTTP API exactly as by the CLI.
"""

from __future__ import annotations

from typing import Any

from clawkb.errors import ConfigError
from clawkb.retrieve.filters import Filters, parse_meta, parse_time
from clawkb.retrieve.settings import FUSIONS, MODES

NORMS = ("minmax", "zscore")
#: Options passed through to the pipeline settings unchanged.
PASS_THROUGH = (
    "fusion",
    "rrf_k",
    "w_lexical",
    "w_dense",
    "w_recency",
    "norm",
    "rerank",
    "early_return",
    "min_confidence",
)


def rerankers() -> tuple[str, ...]:
    """Reranker names: the built-ins and every installed plugin."""
    from clawkb.plugins import names

    return tuple(names("clawkb.rerankers"))


def choices() -> dict[str, tuple[str, ...]]:
    """The allowed values of the options that take a name."""
    return {"mode": MODES, "fusion": FUSIONS, "norm": NORMS, "rerank": rerankers()}


def check_choices(params: dict[str, Any]) -> None:
    """A one-line error for a named option outside its choices."""
    for name, allowed in choices().items():
        value = params.get(name)
        if value is not None and value not in allowed:
            raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")


def pipeline_kwargs(params: dict[str, Any]) -> dict[str, Any]:
    """Turn parsed retrieval options into ``kb.search`` keywords (pops them from params)."""
    mode = params.pop("mode", None)
    doc_types = params.pop("doc_types", ())
    meta = params.pop("meta", ())
    since, until = params.pop("since", None), params.pop("until", None)
    out: dict[str, Any] = {}
    if mode:
        out["mode"] = mode
    if doc_types or meta or since or until:
        out["filters"] = Filters(
            doc_types=tuple(doc_types),
            metadata=parse_meta(tuple(meta)),
            since=parse_time(since) if since else None,
            until=parse_time(until) if until else None,
        )
    if params.pop("no_merge", False):
        out["merge"] = False
    for key in PASS_THROUGH:
        value = params.pop(key, None)
        if value is not None:
            out[key] = value
    return out
