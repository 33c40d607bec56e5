"""The cheap decision ``KnowledgeBase.search`` makes before anything else loads.

Kept apart from :mod:`clawkb.retrieve.pipeline` so the default lexical path
pays one dictionary lookup and, at most, one ``meta`` row read: no extra
imports, no model.
"""

from __future__ import annotations

from typing import Any


def needs_pipeline(kb: Any, mode: str | None, filters: Any, options: dict[str, Any]) -> bool:
    """True when the staged pipeline must run instead of plain lexical search."""
    if options or filters is not None:
        return True
    conf = kb.config.extra.get("retrieval") or {}
    if (isinstance(conf, dict) and conf.get("synonyms")) or (kb.home / "synonyms.txt").is_file():
        return True  # the query rewrite (synonyms) runs in the pipeline
    if isinstance(conf, dict) and conf.get("glossary") is False:
        return True  # the plain path always expands with the glossary
    if mode is not None and mode != "auto":
        return mode != "lexical"
    configured = conf.get("mode", "auto") if isinstance(conf, dict) else "auto"
    if configured != "auto":
        return configured != "lexical" or bool(conf.get("rerank"))
    row = kb.conn.execute("SELECT 1 FROM meta WHERE key = 'dense_signature'").fetchone()
    return row is not None
