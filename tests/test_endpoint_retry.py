"""Retry-After is honoured by the one retry loop every model endpoint call uses."""

from __future__ import annotations

import email.utils
import time

import pytest

from clawkb.endpoint import retry_after_s
from clawkb.llm import LLMError, LLMSettings, OpenAIChatClient
from llm_server import running_server

MESSAGES = [{"role": "user", "content": '<passage n="1">\nThe LED is on PA5.\n</passage>\nLED?'}]


def _client(base_url: str, **kw: object) -> OpenAIChatClient:
    opts = {"retries": 2, "backoff_s": 0.0, "timeout_s": 5.0, **kw}
    return OpenAIChatClient(LLMSettings(base_url=base_url, model="rate-limited", **opts))  # type: ignore[arg-type]


def test_429_waits_as_long_as_retry_after_says() -> None:
    with running_server(flaky_failures=1, retry_after="1") as srv:
        reply = _client(srv.base_url).chat(MESSAGES)
        first, second = (r["at"] for r in srv.requests)
    assert reply.attempts == 2 and "[1]" in reply.text
    # backoff_s is 0: the only reason to wait is the server's Retry-After: 1
    assert second - first >= 0.95


def test_429_streaming_also_waits() -> None:
    with running_server(flaky_failures=1, retry_after="1") as srv:
        pieces: list[str] = []
        reply = _client(srv.base_url).chat(MESSAGES, on_token=pieces.append)
        first, second = (r["at"] for r in srv.requests)
    assert "".join(pieces) == reply.text and second - first >= 0.95


def test_retry_after_beyond_the_limit_fails_at_once() -> None:
    with running_server(flaky_failures=5, retry_after="120") as srv:
        started = time.monotonic()
        with pytest.raises(LLMError, match=r"asked to retry after 120s; limit 30s"):
            _client(srv.base_url).chat(MESSAGES)
        assert len(srv.requests) == 1
    assert time.monotonic() - started < 10


def test_retry_after_header_forms() -> None:
    assert retry_after_s({"Retry-After": "3"}) == 3.0
    now = time.time()
    date = email.utils.formatdate(now + 10, usegmt=True)
    assert 8.0 <= (retry_after_s({"retry-after": date}, now=now) or 0) <= 10.0
    assert retry_after_s({"Retry-After": "soon"}) is None
    assert retry_after_s({}) is None
