"""The one result type every search returns, and its versioned JSON form.

:class:`SearchResult` is what :func:`clawkb.retrieve.pipeline.run` returns for
every mode (lexical, dense, hybrid), with boards or memories or neither; its
:meth:`~SearchResult.to_dict` is the JSON the CLI (``--json``), the MCP tools
and the HTTP API print, documented in ``docs/json.md`` and checked against
``search-result.schema.json`` beside this module (:func:`json_schema`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawkb.retrieve.hits import hit_dict
from clawkb.types import Hit

if TYPE_CHECKING:
    from clawkb.retrieve.abstain import Confidence

#: Bumped when a field is removed or changes meaning (adding one keeps it).
SCHEMA_VERSION = 1


@cache
def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of :meth:`SearchResult.to_dict`; ``$defs.hit`` is a hit."""
    path = Path(__file__).with_name("search-result.schema.json")
    data: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return data


@dataclass
class SearchResult:
    query: str
    query_tokens: list[str]
    hits: list[Hit]
    took_ms: float
    #: chunks that matched any term; -1 when pruning stopped before counting all
    matched: int = 0
    warnings: list[str] = field(default_factory=list)
    mode: str = "lexical"
    confidence: float = 1.0
    abstained: bool = False
    stages: list[dict[str, Any]] = field(default_factory=list)
    rewrites: list[dict[str, Any]] = field(default_factory=list)
    #: the store id of each hit's best chunk, parallel to ``hits`` (not in JSON)
    chunk_ids: list[int] = field(default_factory=list, repr=False)
    #: when abstained: the passages nearest the query, which ``hits`` leaves out (not in JSON)
    nearest: list[Hit] = field(default_factory=list, repr=False)
    #: the abstain decision (:func:`clawkb.retrieve.notfound.judge`), when one was made
    decision: Confidence | None = field(default=None, repr=False, compare=False)

    @property
    def message(self) -> str:
        if self.abstained:
            return (
                f"no match for {self.query!r}: nothing in the knowledge base looks relevant"
                f" (confidence {self.confidence:.2f})"
            )
        if not self.query_tokens:
            return "the query has no searchable terms"
        if not self.hits:
            return f"no match for {self.query!r} in the knowledge base"
        return ""

    def to_dict(self, *, text: bool = True) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "query": self.query,
            "query_tokens": self.query_tokens,
            "mode": self.mode,
            "took_ms": round(self.took_ms, 3),
            "matched": self.matched,
            "count": len(self.hits),
            "message": self.message,
            "warnings": self.warnings,
            "confidence": round(self.confidence, 4),
            "abstained": self.abstained,
            "stages": self.stages,
            "rewrites": self.rewrites,
            "hits": [hit_dict(h, text=text) for h in self.hits],
        }
