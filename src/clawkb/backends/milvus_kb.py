"""The KnowledgeBase's side of the Milvus backend: search, sync, status.

:func:`kb_search` is the one hook ``KnowledgeBase.search`` calls when the
backend is Milvus: it resolves the mode and retrieval settings the way the
local pipeline does, embeds the query with the KB's embedder (checked against
the collection's model), compiles filters and calls
:func:`clawkb.backends.milvus_search.search`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from clawkb.backends.milvus_filters import compile_filters
from clawkb.backends.milvus_pipeline import run as pipeline_run
from clawkb.backends.milvus_schema import NO_MODEL, check_properties, open_collection
from clawkb.backends.milvus_search import search
from clawkb.backends.settings import MilvusSettings, backend_settings
from clawkb.retrieve.result import SearchResult
from clawkb.text import tokenize

_props: dict[str, dict[str, str]] = {}


def kb_backend(kb: Any) -> MilvusSettings | None:
    """The KB's configured backend (None = local), read once per KB object."""
    if "_backend" not in kb.__dict__:
        kb.__dict__["_backend"] = backend_settings(kb.config.extra, kb.home)
    return kb.__dict__["_backend"]


def collection_props(s: MilvusSettings) -> dict[str, str]:
    if s.key not in _props:
        _props[s.key] = open_collection(s)
    return _props[s.key]


def forget(s: MilvusSettings) -> None:
    _props.pop(s.key, None)


def kb_search(
    kb: Any,
    s: MilvusSettings,
    query: str,
    *,
    limit: int = 10,
    path_globs: Sequence[str] = (),
    explain: bool = False,
    include_memory: bool = False,
    boards: Sequence[str] = (),
    board_only: bool = False,
    mode: str | None = None,
    filters: Any = None,
    namespace: str | None = None,
    datasheets_only: bool = False,
    options: dict[str, Any] | None = None,
) -> SearchResult:
    from clawkb.retrieve.settings import from_config

    rs = from_config(kb.config.extra).with_overrides({**(options or {}), "mode": mode})
    props = collection_props(s)
    has_dense = props.get("clawkb.dim", "0") != "0"
    resolved = rs.mode if rs.mode != "auto" else ("hybrid" if has_dense else "lexical")
    warnings = []
    if resolved != "lexical" and not has_dense:
        warnings.append(f"mode {resolved}: the collection has no vectors (lexical results only)")
        resolved = "lexical"
    tokens = tokenize(query)
    vector, embed = None, None
    if resolved != "lexical":
        vector = query_vector(kb, s, props, query)

        def embed(text: str) -> Any:  # another text of this query (its translation)
            from clawkb.embed.run import kb_embedder

            return kb_embedder(kb).embed_query(text)

    expr = compile_filters(
        filters,
        path_globs=path_globs,
        include_memory=include_memory,
        namespace=namespace,
        boards=boards if board_only else (),
        datasheets_only=datasheets_only,
    )

    def run(e: str) -> SearchResult:
        if s.fuse == "client":
            return pipeline_run(kb, s, rs, query, resolved, vector, expr=e, limit=limit,
                                explain=explain, embed=embed)  # fmt: skip
        return search(
            s,
            query,
            tokens,
            vector,
            mode=resolved,
            expr=e,
            limit=limit,
            explain=explain,
            fusion=rs.fusion,
            rrf_k=rs.rrf_k,
            weights=(rs.w_lexical, rs.w_dense),
            candidates=rs.candidates,
            early_return=rs.early_return,
            min_confidence=rs.min_confidence,
        )

    res = run(expr)
    if boards and not board_only:
        res = _boost(kb, res, run, boards, expr, limit, explain)
    res.warnings += warnings
    return res


def query_vector(kb: Any, s: MilvusSettings, props: dict[str, str], query: str) -> Any:
    from clawkb.embed.run import kb_embedder
    from clawkb.embed.vectors import model_key

    emb = kb_embedder(kb)
    check_properties(s, props, model_key(emb.signature()))
    return emb.embed_query(query)


def _boost(
    kb: Any,
    base: SearchResult,
    run: Any,
    boards: Sequence[str],
    expr: str,
    limit: int,
    explain: bool,
) -> SearchResult:
    """Board boost as locally: the boards' top-k joins the global top-k, scores x boost."""
    from clawkb.backends.milvus_filters import quote
    from clawkb.hardware.ranking import board_boost

    factor = board_boost(kb)
    names = ", ".join(quote(b) for b in boards)
    extra = f"datasheet == true and board in [{names}]"
    boosted = run(f"({expr}) and {extra}" if expr else extra)
    mine = {h.anchor.id for h in boosted.hits}
    pool = {h.anchor.id: h for h in (*base.hits, *boosted.hits)}
    scored = sorted(
        pool.values(), key=lambda h: -(h.score * (factor if h.anchor.id in mine else 1.0))
    )
    hits = []
    for i, h in enumerate(scored[:limit], 1):
        mult = factor if h.anchor.id in mine else 1.0
        exp = h.explanation
        if explain:
            exp = {**(exp or {}), "board": {"boost": mult}, "final": round(h.score * mult, 6)}
        hits.append(dataclasses.replace(h, rank=i, score=h.score * mult, explanation=exp))
    base.hits = hits
    return base


def sync_kb(kb: Any, *, full: bool = False, progress: Any = None) -> Any:
    """`clawkb sync`: catch the lexical index up, then replay the log into Milvus."""
    from clawkb.backends.milvus_sync import sync_milvus
    from clawkb.errors import ConfigError

    s = kb_backend(kb)
    if s is None:
        raise ConfigError(
            f"{kb.home / 'config.yaml'}: no Milvus backend configured"
            " (set backend: {kind: milvus, uri: ...})"
        )
    kb.ensure_fresh()
    with kb.writer():
        rep = sync_milvus(kb, s, full=full, progress=progress)
    forget(s)
    return rep


def after_write(kb: Any, report: Any) -> Any:
    """Called by ``KnowledgeBase.index`` with the write lock held: push to Milvus.

    The store stays the truth: when Milvus cannot be reached the run still
    succeeds and says so; `clawkb sync` (or the next index run) catches up.
    """
    from clawkb.backends.milvus_sync import sync_milvus
    from clawkb.errors import ClawkbError

    s = kb_backend(kb)
    if s is not None and s.auto_sync:
        try:
            sync_milvus(kb, s)
        except ClawkbError as exc:
            report.warnings.append((s.uri, f"milvus sync: {exc}; run `clawkb sync` to retry"))
        forget(s)
    return report


def backend_status(kb: Any) -> dict[str, Any]:
    s = kb_backend(kb)
    if s is None:
        return {"kind": "local"}
    from clawkb.backends.milvus_sync import sync_status

    return sync_status(kb, s)


__all__ = ["NO_MODEL", "after_write", "backend_status", "kb_backend", "kb_search", "sync_kb"]
