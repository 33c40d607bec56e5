"""clawkb: a local-first bilingual knowledge base for engineers and their agents.

Public API::

    from clawkb import KnowledgeBase, TextRecord
    with KnowledgeBase.open("./.clawkb", create=True) as kb:
        kb.index(["notes/"])
        for hit in kb.search("DDR 走线阻抗").hits:
            print(hit.anchor.location, hit.anchor.heading_path)
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

# The parser sandbox forks worker processes (clawkb.parsers.limits). With the Milvus
# backend, gRPC's fork handlers would run in those children and crash them under
# the sandbox's limits; the children never use gRPC, so its fork support stays off.
# It must be set before grpc is first imported, hence here.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

#: The C extensions. Each has a pure Python / numpy fallback that gives the same
#: results; ``CLAWKB_NO_NATIVE=1`` makes them unimportable so the fallbacks run, as
#: on a machine without a compiler (``make test`` runs the core tests that way too).
NATIVE_MODULES = (
    "clawkb.index._bm25native",
    "clawkb.index._blockmax",
    "clawkb.index._postings",
    "clawkb.text._chunknative",
    "clawkb.text._toknative",
)
if os.environ.get("CLAWKB_NO_NATIVE", "") not in ("", "0"):
    import sys

    for _name in NATIVE_MODULES:
        sys.modules[_name] = None  # type: ignore[assignment]  # import raises ImportError

__version__ = "0.1.0"

__all__ = [
    "Anchor",
    "Chunk",
    "ClawkbError",
    "Hit",
    "IndexReport",
    "KnowledgeBase",
    "SearchResult",
    "Slice",
    "TextRecord",
    "__version__",
]

if TYPE_CHECKING:
    from clawkb.errors import ClawkbError
    from clawkb.kb import IndexReport, KnowledgeBase, SearchResult, TextRecord
    from clawkb.types import Anchor, Chunk, Hit, Slice


def __getattr__(name: str) -> object:
    """Import lazily so `clawkb --help` and small tools start fast."""
    if name in ("KnowledgeBase", "IndexReport", "SearchResult", "TextRecord"):
        from clawkb import kb

        return getattr(kb, name)
    if name in ("Anchor", "Chunk", "Hit", "Slice"):
        from clawkb import types

        return getattr(types, name)
    if name == "ClawkbError":
        from clawkb.errors import ClawkbError

        return ClawkbError
    raise AttributeError(name)
