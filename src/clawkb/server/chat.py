"""``POST /api/v1/chat``: questions with follow-ups, one conversation at a time.

The server keeps each conversation's turns in memory (bounded: the newest
:data:`MAX_CONVERSATIONS`, :data:`MAX_TURNS` turns each). A follow-up is
rewritten into a standalone query (:mod:`clawkb.answer.followup`) before
retrieval, and every turn carries its own citations. Without an LLM the answer
is extractive, as ``ask`` is.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from clawkb.errors import NotFoundError
from clawkb.server.api_read import state_of
from clawkb.server.ask import AskIn, _event, _stream, answer_json, check_rate, sse

router = APIRouter(prefix="/api/v1", tags=["ask"])

MAX_CONVERSATIONS = 200
MAX_TURNS = 20


class ChatIn(BaseModel):
    question: str = Field(min_length=1, max_length=4000)
    conversation: str | None = Field(default=None, max_length=64)
    limit: int = Field(default=6, ge=1, le=50)
    no_llm: bool = False
    stream: bool = False


class Conversations:
    """Turns per conversation id, oldest conversations dropped first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()

    def turns(self, cid: str | None) -> tuple[str, list[dict[str, Any]]]:
        with self._lock:
            if cid is None:
                cid = secrets.token_hex(8)
                self._items[cid] = []
            elif cid not in self._items:
                raise NotFoundError(
                    f"no conversation {cid!r} (the server keeps the newest {MAX_CONVERSATIONS})"
                )
            self._items.move_to_end(cid)
            while len(self._items) > MAX_CONVERSATIONS:
                self._items.popitem(last=False)
            return cid, list(self._items[cid])

    def add(self, cid: str, turn: dict[str, Any]) -> None:
        with self._lock:
            turns = self._items.setdefault(cid, [])
            turns.append(turn)
            del turns[:-MAX_TURNS]


@router.post(
    "/chat",
    summary="A conversation turn: follow-ups rewritten, citations per turn",
    response_model=None,  # JSON, or an SSE stream
)
async def chat(request: Request, body: ChatIn) -> dict[str, Any] | StreamingResponse:
    from clawkb.answer.followup import standalone

    st = state_of(request)
    check_rate(request, st)
    cid, turns = st.conversations.turns(body.conversation)
    query = standalone(body.question, [t["standalone"] for t in turns])
    st.conversations.add(cid, {"question": body.question, "standalone": query})
    head = {"conversation": cid, "turn": len(turns) + 1, "question": body.question,
            "standalone": query}  # fmt: skip
    inner = AskIn(question=query, limit=body.limit, stream=body.stream, no_llm=body.no_llm)
    if not body.stream:
        return {**head, "result": await answer_json(st, inner)}

    async def events() -> AsyncIterator[bytes]:  # ask's events after one naming the turn
        yield _event("turn", head)
        async for piece in _stream(st, inner):
            yield piece

    return sse(events())
