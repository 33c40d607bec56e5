"""Memory value types, input validation and the recall weighting formula.

Kept free of I/O so the rules an agent runs into (what a valid namespace is,
how a TTL is written, how recency and importance bend the ranking) can be
read and tested in one place.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from clawkb.errors import ConfigError
from clawkb.retrieve.hits import hit_dict
from clawkb.retrieve.result import SCHEMA_VERSION
from clawkb.store.memory_repo import MemoryRecord as MemoryRecord  # the row type
from clawkb.types import Hit

#: Every memory is indexed as the document ``memory://<namespace>/<id>``.
SCHEME = "memory://"
DEFAULT_NAMESPACE = "default"
DEFAULT_IMPORTANCE = 0.5
#: A memory is a fact or a lesson, not a document: longer text belongs in `clawkb index`.
MAX_TEXT_CHARS = 20_000
MAX_TAG_CHARS = 64

_NAMESPACE = re.compile(r"^\w[\w.\-]{0,63}$")
DAY = 86400.0


@dataclass(frozen=True, slots=True)
class StoreResult:
    """What :meth:`Memory.store` did: ``created`` is False for a repeated write."""

    record: MemoryRecord
    created: bool

    def to_dict(self) -> dict[str, Any]:
        return {**self.record.to_dict(), "created": self.created}


@dataclass(frozen=True, slots=True)
class RecallHit:
    """A recalled passage: a memory, or (when asked) a document hit.

    ``score`` orders the results; ``relevance`` is the retrieval score and
    ``weight`` the memory factor (importance × recency; 1.0 for documents).
    """

    source: str  # "memory" | "document"
    score: float
    relevance: float
    weight: float
    hit: Hit
    memory: MemoryRecord | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            **hit_dict(self.hit),
            "source": self.source,
            "score": round(self.score, 6),
            "relevance": round(self.relevance, 6),
            "weight": round(self.weight, 6),
            "memory": self.memory.to_dict() if self.memory else None,
        }


@dataclass
class RecallResult:
    query: str
    hits: list[RecallHit]
    took_ms: float
    warnings: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "query": self.query,
            "took_ms": round(self.took_ms, 3),
            "count": len(self.hits),
            "warnings": self.warnings,
            "hits": [h.to_dict() for h in self.hits],
        }


@dataclass(frozen=True, slots=True)
class Weighting:
    """How recall bends relevance by importance and age (see :func:`memory_weight`)."""

    half_life_days: float = 30.0
    recency_floor: float = 0.25


def memory_weight(importance: float, age_seconds: float, w: Weighting) -> float:
    """``(0.5 + importance) × (floor + (1 − floor) × 0.5 ** (age_days / half_life))``.

    Importance 0.5 (the default) is neutral; 1.0 weighs a memory 1.5×, 0 weighs
    it 0.5×. Age counts from the last write, so repeating a memory refreshes
    it. The floor keeps an old but exactly matching memory findable: it
    fades to ``floor`` of its weight, never to nothing.
    """
    age_days = max(0.0, age_seconds) / DAY
    decay = w.recency_floor + (1.0 - w.recency_floor) * 0.5 ** (age_days / w.half_life_days)
    return (0.5 + importance) * decay


# -- validation -------------------------------------------------------------
def check_namespace(namespace: str) -> str:
    ns = unicodedata.normalize("NFC", (namespace or "").strip())
    if not _NAMESPACE.match(ns):
        raise ConfigError(
            f"namespace {namespace!r}: use 1-64 letters, digits, '_', '-' or '.' (not starting with '-' or '.')"
        )
    return ns


def check_text(text: str) -> str:
    t = unicodedata.normalize("NFC", text or "").strip()
    if not t:
        raise ConfigError("memory text is empty")
    if len(t) > MAX_TEXT_CHARS:
        raise ConfigError(
            f"memory text has {len(t)} characters (limit {MAX_TEXT_CHARS});"
            " index long material as a document with `clawkb index`"
        )
    return t


def check_tags(tags: Iterable[str]) -> tuple[str, ...]:
    if isinstance(tags, str):
        tags = [tags]
    out = []
    for tag in tags:
        t = unicodedata.normalize("NFC", str(tag)).strip()
        if not t:
            raise ConfigError("a tag is empty")
        if len(t) > MAX_TAG_CHARS:
            raise ConfigError(f"tag {t[:20]!r}... is longer than {MAX_TAG_CHARS} characters")
        out.append(t)
    return tuple(sorted(set(out)))


def check_importance(importance: float) -> float:
    try:
        value = float(importance)
    except (TypeError, ValueError):
        raise ConfigError(
            f"importance must be a number between 0 and 1, got {importance!r}"
        ) from None
    if not 0.0 <= value <= 1.0:
        raise ConfigError(f"importance must be between 0 and 1, got {importance!r}")
    return value


def parse_ttl(ttl: str | float | int | None) -> float | None:
    """Seconds from ``3600``, ``"90s"``, ``"30m"``, ``"12h"``, ``"7d"`` or ``"2w"``; None = forever."""
    from clawkb.durations import parse_duration

    if ttl is None or ttl == "":
        return None
    seconds = parse_duration(ttl if isinstance(ttl, int | float) else str(ttl), "ttl")
    if seconds <= 0:
        raise ConfigError(f"ttl {ttl!r} must be positive")
    return seconds


def memory_id(namespace: str, text: str) -> str:
    """The dedup key: the same text in the same namespace is the same memory.

    Whitespace runs count as one space, so re-wrapped text still dedups.
    """
    key = namespace + "\0" + " ".join(text.split())
    return hashlib.blake2b(key.encode("utf-8"), digest_size=8).hexdigest()


def memory_path(namespace: str, mid: str) -> str:
    return f"{SCHEME}{namespace}/{mid}"
