"""What each MCP tool does, as plain functions over one open knowledge base.

Kept apart from the SDK wiring (:mod:`clawkb.mcp.server`) so the behaviour is
ordinary Python: every result is JSON-ready, every passage carries its anchor
(path, line span, page, heading path) and the prompt-injection flags of its
text, because an agent will paste these passages into its own context.

The SDK runs synchronous tools on worker threads; one KB connection is not
meant for concurrent use, so every call holds :attr:`KBTools.lock`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from clawkb.errors import ConfigError
from clawkb.retrieve.hits import anchor_dict
from clawkb.text.injection import FLAG_DESCRIPTIONS, flag_injection

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase
    from clawkb.store.repo import ChunkRow

MAX_LIMIT = 50


def hardware_function() -> Callable[..., Any] | None:
    """``clawkb.hardware.hardware_context`` when the hardware feature is installed."""
    try:
        from clawkb.hardware import hardware_context
    except ImportError:  # an installation without the hardware feature
        return None
    return hardware_context if callable(hardware_context) else None


def _flag_legend(items: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Descriptions of the flags that occur, so an agent can read them in place."""
    seen = {f for it in items for f in it.get("injection_flags", ())}
    return {f: FLAG_DESCRIPTIONS.get(f, f) for f in sorted(seen)}


def _check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise ConfigError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    return limit


class KBTools:
    """The tool implementations bound to one open :class:`KnowledgeBase`."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self.lock = threading.Lock()

    def search(
        self,
        query: str,
        limit: int = 5,
        paths: Sequence[str] = (),
        include_memory: bool = False,
        options: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``options``: the search-options table's arguments by name (a repeatable one may
        be one string), as `clawkb search` takes them."""
        from clawkb.retrieve.options import all_options, search_kwargs

        given = options or {}
        params: dict[str, Any] = {}
        for o in all_options():
            value = given.get(o.name)
            if o.multiple:
                value = (value,) if isinstance(value, str) else tuple(value or ())
            params[o.key] = o.default if value is None else value
        kwargs = search_kwargs(params)
        with self.lock:
            res = self.kb.search(
                query,
                limit=_check_limit(limit),
                path_glob=list(paths),
                include_memory=include_memory,
                **kwargs,
            )
        data = res.to_dict()
        data["injection_flag_legend"] = _flag_legend(data["hits"])
        return data

    def ask(self, question: str, role: str | None = None, limit: int = 8) -> dict[str, Any]:
        from clawkb.answer import answer

        with self.lock:
            out = answer(self.kb, question, limit=_check_limit(limit), role=role)
        data = out.to_dict()
        data.pop("explanation", None)
        data["injection_flag_legend"] = _flag_legend(data.get("passages", []))
        return data

    def get_chunk(self, anchor: str, neighbours: int = 0) -> dict[str, Any]:
        if not 0 <= neighbours <= 5:
            raise ConfigError(f"neighbours must be between 0 and 5, got {neighbours}")
        with self.lock:
            row = self.kb.chunk(anchor.strip().lstrip("#"))
            before, after = self.kb.neighbours(row, neighbours, neighbours)
        data = self._chunk_dict(row)
        data["before"] = [self._chunk_dict(r) for r in before]
        data["after"] = [self._chunk_dict(r) for r in after]
        data["injection_flag_legend"] = _flag_legend([data, *data["before"], *data["after"]])
        return data

    @staticmethod
    def _chunk_dict(row: ChunkRow) -> dict[str, Any]:
        return {
            **anchor_dict(row.to_anchor()),
            "title": row.title,
            "kind": row.kind,
            "trust": row.trust,
            "domain": row.domain,
            "text": row.text,
            "injection_flags": flag_injection(row.text),
        }

    def knowledge_write(
        self,
        text: str,
        title: str | None = None,
        domain: str | None = None,
        agent: str = "agent",
        task: str = "",
        outcome: str = "",
        anchors: Sequence[str] = (),
    ) -> dict[str, Any]:
        from clawkb.knowledge.writeback import learn

        with self.lock:
            res = learn(
                self.kb,
                text,
                title=title,
                domain=domain,
                agent=agent,
                task=task,
                outcome=outcome,
                anchors=tuple(anchors),
            )
            embedded = _embed_new(self.kb)
        return {**res.to_dict(self.kb.home), **embedded}

    def memory_store(
        self,
        text: str,
        namespace: str = "default",
        tags: Sequence[str] = (),
        importance: float | None = None,
        ttl: str | float | None = None,
    ) -> dict[str, Any]:
        with self.lock:
            res = self.kb.memory.store(
                text, namespace=namespace, tags=tags, importance=importance, ttl=ttl
            )
            embedded = _embed_new(self.kb)
        return {**res.to_dict(), **embedded}

    def memory_recall(
        self,
        query: str,
        namespace: str | None = None,
        limit: int = 5,
        tags: Sequence[str] = (),
        include_documents: bool = False,
    ) -> dict[str, Any]:
        with self.lock:
            res = self.kb.memory.recall(
                query,
                namespace=namespace,
                limit=_check_limit(limit),
                tags=tags,
                include_documents=include_documents,
            )
        data = res.to_dict()
        data["injection_flag_legend"] = _flag_legend(data["hits"])
        return data

    def memory_forget(
        self,
        ids: Sequence[str] = (),
        tags: Sequence[str] = (),
        query: str | None = None,
        namespace: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        with self.lock:
            res = self.kb.memory.forget(
                list(ids), tags=tags, query=query, namespace=namespace, dry_run=dry_run
            )
        return res.to_dict()

    def hardware_context(
        self, query: str, boards: Sequence[str] = (), limit: int = 8
    ) -> dict[str, Any]:
        fn = hardware_function()
        if fn is None:
            raise ConfigError("hardware support is not available in this clawkb installation")
        with self.lock:
            out = dict(fn(self.kb, query, boards=list(boards), limit=_check_limit(limit)))
        with contextlib.suppress(ImportError, KeyError, TypeError):
            from clawkb.hardware import format_context

            out["prompt_block"] = format_context(out)
        passages = out.get("passages") or []
        for p in passages:
            p["injection_flags"] = flag_injection(str(p.get("text", "")))
        out["injection_flag_legend"] = _flag_legend(passages)
        return out


def _embed_new(kb: KnowledgeBase) -> dict[str, Any]:
    """Embed what a write added when the KB has vectors (searchable in every channel at
    once); ``{"vectors": {...}}`` for the tool's result, or nothing without vectors."""
    from clawkb.embed.run import embed_new

    got = embed_new(kb)
    return {"vectors": got} if got else {}
