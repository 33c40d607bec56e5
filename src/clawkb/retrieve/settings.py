"""Retrieval settings as the pipeline reads them: ``retrieval:`` in config.yaml over
the defaults, then per-query overrides.

Every fusion weight and stage budget is a field of
:class:`~clawkb.config.retrieval.RetrievalSettings` (the configuration layer
owns the declaration and the value rules), so the CLI, the API and the
evaluation runner set them the same way.
"""

from __future__ import annotations

from clawkb.config.retrieval import (
    FUSIONS,
    MODES,
    REMOTE_MIN_CONFIDENCE,
    RetrievalSettings,
    from_config,
)

__all__ = [
    "FUSIONS",
    "MODES",
    "REMOTE_MIN_CONFIDENCE",
    "RetrievalSettings",
    "from_config",
    "remote_min_confidence",
]


def remote_min_confidence(s: RetrievalSettings) -> float:
    """The Milvus backend's abstain threshold (:data:`REMOTE_MIN_CONFIDENCE` unless set)."""
    return REMOTE_MIN_CONFIDENCE if s.min_confidence is None else float(s.min_confidence)
