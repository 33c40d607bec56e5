"""Read endpoints of ``/api/v1``: search, chunk, source view, status, runs, memory recall/list,
hardware context and pins. Every hit comes from the library's own ``to_dict`` (docs/json.md)."""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from fastapi import APIRouter, Query, Request, Response
from starlette.routing import Match, Route
from starlette.types import Scope

from clawkb.errors import ConfigError
from clawkb.retrieve.hits import anchor_dict
from clawkb.server import collector
from clawkb.server.security import PathOutsideRoots, inside_roots

if TYPE_CHECKING:
    from clawkb.config import Config
    from clawkb.kb import KnowledgeBase
    from clawkb.memory.model import RecallResult
    from clawkb.retrieve.options import OptionValue
    from clawkb.retrieve.result import SearchResult
    from clawkb.server.app import ServerState
    from clawkb.store.repo import ChunkRow
    from clawkb.types import JSON

router = APIRouter(prefix="/api/v1", tags=["read"])

Multi = Annotated[list[str], Query()]
MAX_LIMIT = 100


def reply(data: JSON) -> Response:
    """JSON without FastAPI's re-validation of the library's already plain dicts (hot path)."""
    return Response(json.dumps(data, ensure_ascii=False), media_type="application/json")


def state_of(request: Request) -> ServerState:
    """The KB a request is for: ``/api/v1/kb/NAME/...`` (see :mod:`clawkb.server.kbs`) or
    the default one."""
    name = request.scope.get("clawkb_kb")
    return request.app.state.kbs[name] if name else request.app.state.clawkb


def _limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise ConfigError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    return limit


async def search(
    request: Request,
    q: Annotated[str, Query(description="The query (any language); blank is a 400 error.")],
    limit: int = 10,
    path: Multi = [],  # noqa: B006 - FastAPI reads the default, never mutates it
    explain: bool = False,
    include_memory: bool = False,
    board: Multi = [],  # noqa: B006
    board_only: bool = False,
    **options: OptionValue,
) -> Response:
    """Hits carry anchor, path, line span, page, heading path, snippet, highlights, trust
    tier and domain; the schema is `clawkb search --json`'s (docs/json.md). The other
    parameters are the search options of `clawkb search` (docs/search-options.md)."""
    from clawkb.retrieve.options import all_options

    given = {o.key: options.get(o.name, o.default) for o in all_options()}
    return await _search(request, q, limit, path, explain, include_memory, board, board_only, given)


async def _search(
    request: Request, q: str, limit: int, path: list[str], explain: bool, include_memory: bool,
    board: list[str], board_only: bool, given: dict[str, Any],
) -> Response:  # fmt: skip
    """The search itself, for the validated route and the plain one (:class:`PlainSearch`)."""
    from clawkb.retrieve.options import search_kwargs

    _limit(limit)
    if board_only and not board:
        raise ConfigError("board_only needs at least one board")
    kwargs = search_kwargs({k: tuple(v) if isinstance(v, list) else v for k, v in given.items()})
    st = state_of(request)

    def run(kb: KnowledgeBase) -> tuple[SearchResult, str]:
        res = kb.search(
            q, limit=limit, path_glob=path, explain=explain, include_memory=include_memory,
            boards=board, board_only=board_only, **kwargs,
        )  # fmt: skip
        # encoded on the reader thread too: the event loop only moves bytes
        return res, json.dumps(res.to_dict(), ensure_ascii=False)

    t0 = time.perf_counter()
    res, body = await st.runtime.read(run)
    st.metrics.observe_search(res, time.perf_counter() - t0)
    collector.after_search()
    return Response(body, media_type="application/json")


_PLAIN_KEYS = frozenset({b"q", b"limit"})


class PlainSearch(Route):
    """``GET /api/v1/search?q=...[&limit=N]`` -- the common call -- without FastAPI's
    per-request validation of the ~30 documented query parameters (about a fifth of a
    search's CPU). Any other query string does not match, and the documented route
    (:func:`search`, which stays the OpenAPI entry) validates it as before."""

    def __init__(self) -> None:
        super().__init__(router.prefix + "/search", self._endpoint, methods=["GET"],
                         include_in_schema=False)  # fmt: skip

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match is not Match.FULL or not _plain_query(scope.get("query_string", b"")):
            return Match.NONE, {}
        return match, {**child, "route": self}

    async def _endpoint(self, request: Request) -> Response:
        from clawkb.retrieve.options import all_options

        params = request.query_params
        given = {o.key: o.default for o in all_options()}
        return await _search(request, params["q"], int(params.get("limit", "10")), [], False,
                             False, [], False, given)  # fmt: skip


def _plain_query(raw: bytes) -> bool:
    """True for ``q=...`` with at most a ``limit=`` of 1-3 digits, each key once."""
    seen: set[bytes] = set()
    for part in raw.split(b"&"):
        key, _, value = part.partition(b"=")
        if key not in _PLAIN_KEYS or key in seen:
            return False
        if key == b"limit" and not (value.isdigit() and len(value) <= 3):
            return False
        seen.add(key)
    return b"q" in seen


def _table_parameters() -> list[inspect.Parameter]:
    """The query parameters of the search-options table (:mod:`clawkb.retrieve.options`),
    with their help and, for names, their choices (shown as the schema's ``enum``)."""
    from clawkb.retrieve.options import all_options

    out = []
    for o in all_options():
        allowed = o.allowed()
        extra = {"enum": list(allowed)} if allowed else None
        meta = Query(description=o.help, json_schema_extra=extra)
        if o.multiple:
            ann: object = Annotated[list[o.kind], meta]  # type: ignore[name-defined]
        elif o.kind is bool and not o.tristate:
            ann = Annotated[bool, meta]
        else:
            ann = Annotated[o.kind | None, meta]
        default: object = [] if o.multiple else o.default
        out.append(inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                     annotation=ann))  # fmt: skip
    return out


Endpoint = TypeVar("Endpoint", bound=Callable[..., Awaitable[Response]])


def _with_table(fn: Endpoint) -> Endpoint:
    """``fn`` with the table's parameters in place of its ``**options`` (FastAPI reads
    ``__signature__``)."""
    sig = inspect.signature(fn)
    fixed = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    fixed = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) if p.name != "request" else p
             for p in fixed]  # fmt: skip
    fn.__signature__ = sig.replace(  # type: ignore[attr-defined]  # a function object
        parameters=[*fixed, *_table_parameters()]
    )
    return fn


router.get("/search", summary="Search (the options of `clawkb search`)")(_with_table(search))


@router.get("/chunks/{anchor}", summary="One chunk by anchor (or unique prefix)")
async def chunk(request: Request, anchor: str, neighbours: int = 0) -> dict[str, Any]:
    if not 0 <= neighbours <= 5:
        raise ConfigError(f"neighbours must be between 0 and 5, got {neighbours}")

    def run(kb: KnowledgeBase) -> dict[str, Any]:
        row = kb.chunk(anchor.strip().lstrip("#"))
        before, after = kb.neighbours(row, neighbours, neighbours)
        return {
            **_chunk_dict(row),
            "before": [_chunk_dict(r) for r in before],
            "after": [_chunk_dict(r) for r in after],
        }

    return await state_of(request).runtime.read(run)


def _chunk_dict(row: ChunkRow) -> dict[str, Any]:
    return {
        **anchor_dict(row.to_anchor()),
        "title": row.title,
        "kind": row.kind,
        "text": row.text,
    }


@router.get("/source/{anchor}", summary="The source around an anchor: its lines, or its page")
async def source(request: Request, anchor: str, context: int = 200) -> dict[str, Any]:
    """Only documents in the store, and only inside the served roots or the KB's own
    ``learned/`` notes."""
    if not 0 <= context <= 5000:
        raise ConfigError(f"context must be between 0 and 5000, got {context}")
    st = state_of(request)

    def run(kb: KnowledgeBase) -> dict[str, Any]:
        from clawkb.server.source import source_view

        row = kb.chunk(anchor.strip().lstrip("#"))
        readable = [*st.roots, kb.home / "learned"]
        if not row.path.startswith("memory://") and not inside_roots(Path(row.path), readable):
            raise PathOutsideRoots(f"{row.path} is outside the served folders")
        return source_view(kb, row, context)

    return await st.runtime.read(run)


@router.get("/status", summary="Counts, index state, last runs, watch state")
async def status(request: Request) -> dict[str, Any]:
    st = state_of(request)

    def run(kb: KnowledgeBase) -> dict[str, Any]:
        out = {**kb.status(), "runs": kb.runs(5)}
        out["search"] = _search_state(out, kb.config)
        return out

    data = await st.runtime.read(run)
    data["server"] = st.describe()
    return data


@router.get("/eval/self", summary="hit@3 per kind of query made from this KB, per mode")
async def eval_self(request: Request, per_kind: int = 30) -> dict[str, Any]:
    """`clawkb eval --self --json`: section titles, rare identifiers and the other language
    of a page, each as a query whose answer the KB names; hit@3 for lexical / dense /
    default. ``per_kind`` (1-200) queries of each kind."""
    if not 1 <= per_kind <= 200:
        raise ConfigError(f"per_kind must be between 1 and 200, got {per_kind}")
    from clawkb.evaluate.self_check import self_eval

    return await state_of(request).runtime.read(
        lambda kb: self_eval(kb, per_kind=per_kind).to_dict()
    )


def _search_state(data: dict[str, Any], config: Config) -> dict[str, Any]:
    """What the status view explains: the mode searches run in, the models, vectors pending."""
    from clawkb.config.retrieval import from_config

    configured = from_config(config).mode
    dense = data.get("dense") or {}
    vectors = int(dense.get("vectors") or 0)
    mode = configured if configured != "auto" else ("hybrid" if vectors else "lexical")
    return {
        "configured": configured,
        "mode": mode,
        "embedding": config.embedding.model if dense else None,
        "llm": config.llm.describe() if config.llm.configured else "extractive (no LLM)",
        "vectors_pending": max(0, int(data.get("chunks") or 0) - vectors) if dense else None,
    }


@router.get("/kbs", summary="The knowledge bases this server serves (the first is the default)")
async def kbs(request: Request) -> dict[str, Any]:
    states = request.app.state.kbs
    return {
        "default": request.app.state.clawkb.settings.name,
        "kbs": [
            {"name": name, "home": st.settings.home.as_posix(), "roots": [r.as_posix() for r in st.roots],
             "token": bool(st.settings.token)}
            for name, st in states.items()
        ],
    }  # fmt: skip


@router.get("/runs", summary="The last indexing runs with their errors")
async def runs(request: Request, limit: int = 20) -> dict[str, Any]:
    _limit(limit)
    items = await state_of(request).runtime.read(lambda kb: kb.runs(limit))
    return {"runs": items}


@router.get("/memory", summary="List memories, newest first")
async def memory_list(
    request: Request,
    namespace: str | None = None,
    tag: Multi = [],  # noqa: B006
    limit: int = 50,
) -> dict[str, Any]:
    _limit(limit)

    def run(kb: KnowledgeBase) -> dict[str, Any]:
        items = kb.memory.list(namespace, tag, limit)
        return {"memories": [m.to_dict() for m in items], "namespaces": kb.memory.namespaces()}

    return await state_of(request).runtime.read(run)


@router.get("/memory/recall", summary="Recall memories (relevance x importance x recency)")
async def memory_recall(
    request: Request,
    q: Annotated[str, Query(min_length=1)],
    namespace: str | None = None,
    limit: int = 5,
    tag: Multi = [],  # noqa: B006
    include_documents: bool = False,
) -> dict[str, Any]:
    _limit(limit)

    def run(kb: KnowledgeBase) -> dict[str, Any]:
        res = kb.memory.recall(q, namespace, limit, tags=tag, include_documents=include_documents)
        return _recall_dict(q, res)

    return await state_of(request).runtime.read(run)


def _recall_dict(query: str, res: RecallResult) -> dict[str, Any]:
    """The same JSON as `clawkb memory recall --json` (docs/json.md)."""
    data = res.to_dict()
    data["query"] = query
    return data


@router.get("/hardware/context", summary="Board-aware pins, aliases and datasheet passages")
async def hardware_context(
    request: Request,
    q: Annotated[str, Query(min_length=1)],
    board: Multi = [],  # noqa: B006
    limit: int = 8,
) -> dict[str, Any]:
    _limit(limit)
    from clawkb.hardware import format_context
    from clawkb.hardware import hardware_context as context

    def run(kb: KnowledgeBase) -> dict[str, Any]:
        out = dict(context(kb, q, boards=board, limit=limit))
        out["prompt_block"] = format_context(out)
        return out

    return await state_of(request).runtime.read(run)


@router.get("/hardware/pins", summary="Pin aliases per board, with conflicts")
async def pins(request: Request, board: str | None = None) -> dict[str, Any]:
    from clawkb.hardware import list_pins

    return await state_of(request).runtime.read(lambda kb: list_pins(kb, board))
