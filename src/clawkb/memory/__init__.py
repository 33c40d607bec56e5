"""Agent long-term memory in the knowledge-base store.

Namespaced memories with tags, importance and optional expiry; recalled
through the same BM25F index as documents, weighted by importance and
recency; forgotten by id, tag or query (with a dry run). Use ``kb.memory``::

    with KnowledgeBase.open(home) as kb:
        mid = kb.memory.store("I2C1 on the LX board needs 4.7k pull-ups",
                              namespace="bringup", tags=["i2c"]).record.id
        for hit in kb.memory.recall("i2c pull-up", namespace="bringup").hits:
            print(hit.score, hit.hit.text)
"""

from clawkb.memory.api import ForgetResult, Memory
from clawkb.memory.model import (
    DEFAULT_NAMESPACE,
    SCHEME,
    MemoryRecord,
    RecallHit,
    RecallResult,
    StoreResult,
    Weighting,
    memory_weight,
    parse_ttl,
)

__all__ = [
    "DEFAULT_NAMESPACE",
    "SCHEME",
    "ForgetResult",
    "Memory",
    "MemoryRecord",
    "RecallHit",
    "RecallResult",
    "StoreResult",
    "Weighting",
    "memory_weight",
    "parse_ttl",
]
