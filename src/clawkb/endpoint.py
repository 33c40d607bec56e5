"""HTTP to model endpoints (chat, embeddings, rerank): httpx plus one retry loop.

Every remote call clawkb makes goes through :func:`with_retries`, so they all
treat failures the same way:

* connection errors, timeouts and HTTP 408 / 429 / 5xx are *transient*: the
  call is repeated up to ``retries`` more times;
* the wait before the next try is the server's ``Retry-After`` (seconds or an
  HTTP date) when it sends one, else ``backoff_s * 2**(attempt-1)``;
* a ``Retry-After`` longer than ``max_wait_s`` is not slept through: the call
  fails at once and the message says how long the server asked to wait;
* any other HTTP status fails at once.

httpx gives timeouts, connection pooling and streaming; the loop is small
enough that a retry library would not earn its place.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from clawkb.errors import EndpointError

if TYPE_CHECKING:
    from clawkb.types import JSON

T = TypeVar("T")


class Transient(Exception):
    """A failure worth retrying; ``retry_after`` is the server's requested wait (s)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def is_transient_status(code: int) -> bool:
    return code in (408, 429) or code >= 500


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or HTTP date), else None."""
    raw = headers.get("retry-after") or headers.get("Retry-After")
    if not raw:
        return None
    raw = raw.strip()
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def with_retries(
    call: Callable[[int], T],
    *,
    retries: int,
    backoff_s: float,
    max_wait_s: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[T, int]:
    """Run ``call(attempt)`` until it succeeds; returns (result, attempts used).

    Raises the last :class:`Transient` when every attempt failed or the server
    asked for a wait longer than ``max_wait_s``.
    """
    attempts = retries + 1
    for attempt in range(1, attempts + 1):
        try:
            return call(attempt), attempt
        except Transient as exc:
            if attempt == attempts:
                raise
            wait = exc.retry_after
            if wait is not None and wait > max_wait_s:
                raise Transient(
                    f"{exc} (the server asked to retry after {wait:g}s; limit {max_wait_s:g}s)"
                ) from None
            sleep(backoff_s * 2 ** (attempt - 1) if wait is None else wait)
    raise AssertionError("unreachable")


def transient_from(exc: httpx.HTTPError, timeout: float) -> Transient:
    """A connection-level httpx error as a retryable failure with a plain message."""
    if isinstance(exc, httpx.TimeoutException):
        return Transient(f"no response within {timeout:g}s")
    if isinstance(exc, httpx.ConnectError):
        return Transient(f"cannot connect ({exc})")
    return Transient(f"connection failed ({exc})")


def post_json(
    url: str,
    payload: dict[str, Any],
    headers: Mapping[str, str],
    timeout: float,
    *,
    retries: int = 2,
    backoff_s: float = 0.2,
    max_wait_s: float = 30.0,
) -> JSON:
    """POST JSON and decode the JSON answer, with the retry rules above."""

    def once(_attempt: int) -> JSON:
        try:
            resp = httpx.post(url, json=payload, headers=dict(headers), timeout=timeout)
        except httpx.HTTPError as exc:
            raise transient_from(exc, timeout) from None
        if resp.status_code >= 400:
            detail = f"HTTP {resp.status_code}: {resp.text[:200]}"
            if is_transient_status(resp.status_code):
                raise Transient(detail, retry_after_s(resp.headers))
            raise EndpointError(f"{url}: request failed ({detail})")
        try:
            data: JSON = json.loads(resp.content)
            return data
        except ValueError as exc:
            raise EndpointError(f"{url}: answer is not JSON ({exc})") from exc

    try:
        return with_retries(once, retries=retries, backoff_s=backoff_s, max_wait_s=max_wait_s)[0]
    except Transient as exc:
        raise EndpointError(f"{url}: request failed ({exc})") from None
