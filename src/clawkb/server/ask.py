"""``POST /api/v1/ask``: a cited answer, as JSON or as a Server-Sent Events stream.

Stream events, in order: ``token`` (``{"text": ...}``, as the model writes;
an extractive answer arrives as one token), ``sources`` (the whole answer
object of :meth:`clawkb.answer.Answer.to_dict`: cleaned text, citations,
passages), then ``done``. A failure mid-stream is an ``error`` event with the
one error shape ``{"code", "message"}``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from clawkb.server.api_read import state_of
from clawkb.server.errors import error_for

if TYPE_CHECKING:
    from clawkb.answer.core import Answer
    from clawkb.kb import KnowledgeBase
    from clawkb.server.app import ServerState

router = APIRouter(prefix="/api/v1", tags=["ask"])


class AskIn(BaseModel):
    question: str = Field(max_length=4000)  # blank: 400 from answer()
    limit: int = Field(default=8, ge=1, le=50)
    role: str | None = None
    stream: bool = False
    no_llm: bool = False


class RateLimited(Exception):
    def __init__(self, retry_after: float) -> None:
        super().__init__(f"too many questions from this client; retry in {retry_after:.0f} s")
        self.retry_after = retry_after


def _answer(kb: KnowledgeBase, body: AskIn, on_token: Callable[[str], None] | None) -> Answer:
    from clawkb.answer import answer

    return answer(
        kb, body.question, limit=body.limit, role=body.role,
        llm="none" if body.no_llm else "auto", on_token=on_token,
    )  # fmt: skip


@router.post(
    "/ask",
    summary="Answer a question with [n] citations (JSON, or SSE with stream)",
    response_model=None,  # JSON, or an SSE stream
)
async def ask(request: Request, body: AskIn) -> dict[str, Any] | StreamingResponse:
    st = state_of(request)
    check_rate(request, st)
    if not body.stream:
        return await answer_json(st, body)
    return sse(_stream(st, body))


def check_rate(request: Request, st: ServerState) -> None:
    """Questions (ask and chat) are limited per client address."""
    client = request.client.host if request.client else "?"
    wait = st.ask_limiter.allow(client)
    if wait:
        raise RateLimited(wait)


async def answer_json(st: ServerState, body: AskIn) -> dict[str, Any]:
    t0 = time.perf_counter()
    # Reads never hold up writes: a model call may take a minute.
    res = await asyncio.to_thread(st.runtime.read_sync, lambda kb: _answer(kb, body, None))
    st.metrics.observe_answer(res, time.perf_counter() - t0, 0)
    out: dict[str, Any] = res.to_dict()
    out.pop("explanation", None)
    return out


def sse(events: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


def _event(name: str, data: object) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


async def _stream(st: ServerState, body: AskIn) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    q: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    tokens = 0

    def on_token(piece: str) -> None:
        nonlocal tokens
        tokens += 1
        loop.call_soon_threadsafe(q.put_nowait, ("token", piece))

    def work() -> None:
        t0 = time.perf_counter()
        try:
            res = st.runtime.read_sync(lambda kb: _answer(kb, body, on_token))
        except Exception as exc:  # reported as an error event
            loop.call_soon_threadsafe(q.put_nowait, ("error", exc))
            return
        st.metrics.observe_answer(res, time.perf_counter() - t0, tokens)
        loop.call_soon_threadsafe(q.put_nowait, ("result", res))

    # a pooled thread: its reader KB is reused by later questions
    loop.run_in_executor(None, work)
    while True:
        kind, value = await q.get()
        if kind == "token":
            yield _event("token", {"text": value})
        elif kind == "error":
            _status, code, message = error_for(value)
            yield _event("error", {"code": code, "message": message})
            yield _event("done", {})
            return
        else:
            out = value.to_dict()
            out.pop("explanation", None)
            if not tokens:
                yield _event("token", {"text": out["answer"]})
            yield _event("sources", out)
            yield _event("done", {})
            return
