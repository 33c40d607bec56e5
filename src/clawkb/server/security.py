"""Who may call, from where, with how much: token, Host header, body size, rate, roots.

The checks run as one plain ASGI middleware in front of every route (the web
page's own files and the health probes excepted from the token), so the JSON
API, ``/metrics`` and ``/mcp`` share exactly the same rules.
"""

from __future__ import annotations

import hmac
import json
import os
import threading
import time
import unicodedata
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from clawkb.errors import ConfigError
from clawkb.server.settings import LOOPBACK_NAMES, ServerSettings, is_loopback

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Paths anyone who can reach the server may GET: the page asks for the token itself.
PUBLIC_PREFIXES = ("/static/", "/healthz", "/readyz", "/health")
PUBLIC_PATHS = {"/", "/favicon.ico"}


class PathOutsideRoots(ConfigError):
    """A path that resolves outside every served root (``..``, absolute, symlink)."""


def error_body(code: str, message: str) -> bytes:
    return json.dumps({"code": code, "message": message}, ensure_ascii=False).encode()


async def send_error(
    send: Send, status: int, code: str, message: str, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    body = error_body(code, message)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def allowed_hosts(settings: ServerSettings) -> set[str] | None:
    """Host header values accepted (without port); None = any (wildcard bind with a token)."""
    hosts = {h.lower() for h in settings.allowed_hosts}
    if settings.host in ("0.0.0.0", "::", ""):
        return None if not hosts else hosts | set(LOOPBACK_NAMES)
    hosts.add(settings.host.lower().strip("[]"))
    if is_loopback(settings.host):
        hosts |= set(LOOPBACK_NAMES)
    return hosts


def _host_of(header: str) -> str:
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class Guard:
    """ASGI middleware: Host check, bearer token, request body limit."""

    def __init__(self, app: ASGIApp, settings: ServerSettings, upload_path: str) -> None:
        self.app = app
        self.settings = settings
        self.hosts = allowed_hosts(settings)
        self.token = settings.token.encode() if settings.token else None
        self.upload_path = upload_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if self.hosts is not None and _host_of(headers.get("host", "")) not in self.hosts:
            await send_error(
                send, 421, "bad_host", f"Host {headers.get('host', '')!r} is not served here"
            )
            return
        path = scope["path"]
        if self.token is not None and not _public(path) and not self._authorized(headers):
            await send_error(
                send,
                401,
                "unauthorized",
                "a bearer token is required (Authorization: Bearer TOKEN)",
                [(b"www-authenticate", b"Bearer")],
            )
            return
        limit = (
            self.settings.upload_max_bytes + 65536
            if path == self.upload_path
            else self.settings.max_body_bytes
        )
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await send_error(send, 413, "too_large", f"the request body is over {limit} bytes")
            return
        await self.app(scope, _limited(receive, limit), send)

    def _authorized(self, headers: dict[str, str]) -> bool:
        auth = headers.get("authorization", "")
        scheme, _, value = auth.partition(" ")
        assert self.token is not None
        return scheme.lower() == "bearer" and hmac.compare_digest(
            value.strip().encode(), self.token
        )


def _public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


class BodyTooLarge(Exception):
    pass


def _limited(receive: Receive, limit: int) -> Receive:
    seen = 0

    async def wrapped() -> Message:
        nonlocal seen
        msg = await receive()
        if msg["type"] == "http.request":
            seen += len(msg.get("body", b""))
            if seen > limit:
                raise BodyTooLarge(f"the request body is over {limit} bytes")
        return msg

    return wrapped


class RateLimiter:
    """A token bucket per client: ``per_minute`` calls, refilled continuously."""

    def __init__(self, per_minute: int) -> None:
        self.rate = per_minute / 60.0
        self.capacity = float(max(per_minute, 1))
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def allow(self, client: str) -> float:
        """0 when allowed, else seconds until the next call would be."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        with self._lock:
            tokens, at = self._buckets.get(client, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - at) * self.rate)
            if tokens >= 1:
                self._buckets[client] = (tokens - 1, now)
                return 0.0
            self._buckets[client] = (tokens, now)
            return (1 - tokens) / self.rate


def confine(raw: str, roots: Sequence[Path]) -> Path:
    """``raw`` (relative to the first root, or absolute) resolved inside one of ``roots``.

    Symlinks are resolved before the check, so a link pointing out is refused
    like ``..``; NUL bytes and backslashes are refused outright.
    """
    if not roots:
        raise PathOutsideRoots("this server has no roots: start it with `clawkb serve PATH`")
    text = unicodedata.normalize("NFC", raw.strip())
    if not text or "\x00" in text or "\\" in text:
        raise PathOutsideRoots(f"path {raw!r} is not allowed")
    candidate = Path(os.path.expanduser(text)) if text.startswith("~") else Path(text)
    if not candidate.is_absolute():
        candidate = roots[0] / candidate
    resolved = candidate.resolve()
    for root in roots:
        real = root.resolve()
        if resolved == real or real in resolved.parents:
            return resolved
    raise PathOutsideRoots(f"path {raw!r} is outside the served folders")


def inside_roots(path: Path, roots: Sequence[Path]) -> bool:
    try:
        confine(str(path), roots)
    except PathOutsideRoots:
        return False
    return True
