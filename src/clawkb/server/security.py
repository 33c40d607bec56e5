"""Who may call, from where, with how much: token, Host header, origin, body size, rate, roots.

The checks run as one plain ASGI middleware in front of every route (the web
page's own files and the health probes excepted from the token), so the JSON
API, ``/metrics`` and ``/mcp`` share exactly the same rules.

Cross-site writes: a browser lets any web page send a "simple" request (a
form POST: ``multipart/form-data``, ``application/x-www-form-urlencoded`` or
``text/plain``) to the loopback server without asking. So every
state-changing request (POST, PUT, PATCH, DELETE) that names an origin
(``Origin``, else the ``Referer``'s) must come from the server's own origin or
one listed in ``server.allowed_origins`` / ``server.cors_origins``; and one
with a simple content type must also carry the ``X-Clawkb-Request`` header,
which no page can add to a cross-site request without a CORS preflight that
this server does not grant. ``/mcp`` checks the origin on every method.
Every response carries a Content-Security-Policy, ``X-Frame-Options: DENY``
and ``X-Content-Type-Options: nosniff``.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import unicodedata
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from clawkb.errors import PathOutsideRoots
from clawkb.server.kbs import split_path, token_ok
from clawkb.server.settings import LOOPBACK_NAMES, ServerSettings, is_loopback, normal_origin

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Paths anyone who can reach the server may GET: the page asks for the token itself.
PUBLIC_PREFIXES = ("/static/", "/healthz", "/readyz", "/health")
PUBLIC_PATHS = {"/", "/favicon.ico"}
#: Methods that change something: their origin is checked.
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: The header the page (and any script of ours) sends with a form-type body.
CLIENT_HEADER = "x-clawkb-request"
#: Content types a cross-site page may send without a CORS preflight.
SIMPLE_TYPES = frozenset({"multipart/form-data", "application/x-www-form-urlencoded", "text/plain"})
#: On every response: no framing, no type sniffing, only our own scripts and styles.
SECURITY_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
        b" connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self';"
        b" frame-ancestors 'none'",
    ),
    (b"referrer-policy", b"same-origin"),
)


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


def _origin_of(headers: dict[str, str]) -> str | None:
    """The origin a browser says the request comes from: ``Origin``, else the Referer's."""
    origin = headers.get("origin")
    if origin is not None:
        return origin.strip().lower()
    referer = headers.get("referer")
    if not referer:
        return None
    scheme, sep, rest = referer.strip().partition("://")
    if not sep:
        return "null"
    return f"{scheme}://{rest.split('/', 1)[0].split('?', 1)[0].split('#', 1)[0]}".lower()


def cross_site_reason(
    method: str, path: str, headers: dict[str, str], trusted: frozenset[str]
) -> str | None:
    """Why this request must be refused as cross-site, or None when it may pass."""
    checked = method in UNSAFE_METHODS or path == "/mcp" or path.startswith("/mcp/")
    if not checked:
        return None
    origin = _origin_of(headers)
    if origin is not None:
        own = {
            f"http://{headers.get('host', '').lower()}",
            f"https://{headers.get('host', '').lower()}",
        }
        if origin not in own and origin not in trusted:
            return (
                f"requests from origin {origin!r} are not allowed"
                " (list it in server.allowed_origins to allow it)"
            )
    if method in UNSAFE_METHODS and CLIENT_HEADER not in headers:
        ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        has_body = headers.get("content-length", "0") != "0" or "transfer-encoding" in headers
        if ctype in SIMPLE_TYPES or (not ctype and has_body):
            kind = f"a {ctype} body" if ctype else "a body without a content type"
            return (
                f"a write with {kind} must carry the header X-Clawkb-Request: 1"
                " (it keeps other web sites from posting forms here)"
            )
    return None


def with_security_headers(send: Send) -> Send:
    async def wrapped(msg: Message) -> None:
        if msg["type"] == "http.response.start":
            present = {k.lower() for k, _ in msg.get("headers", [])}
            extra = [(k, v) for k, v in SECURITY_HEADERS if k not in present]
            msg = {**msg, "headers": [*msg.get("headers", []), *extra]}
        await send(msg)

    return wrapped


class Guard:
    """ASGI middleware: Host check, bearer token, origin check, request body limit."""

    def __init__(self, app: ASGIApp, settings: ServerSettings, upload_path: str) -> None:
        self.app = app
        self.settings = settings
        self.hosts = allowed_hosts(settings)
        self.token = settings.token.encode() if settings.token else None
        # KB name -> tokens that open it (the server's token opens every KB)
        self.kb_tokens: dict[str, list[bytes]] = {settings.name: [self.token] if self.token else []}
        for spec in settings.kbs:
            own = [spec.token.encode()] if spec.token else []
            self.kb_tokens[spec.name] = ([self.token] if self.token else []) + own
        self.upload_path = upload_path
        self.trusted = frozenset(
            normal_origin(o) for o in [*settings.allowed_origins, *settings.cors_origins]
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = with_security_headers(send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if self.hosts is not None and _host_of(headers.get("host", "")) not in self.hosts:
            await send_error(
                send, 421, "bad_host", f"Host {headers.get('host', '')!r} is not served here"
            )
            return
        kb, path = split_path(scope["path"])
        if kb is not None:
            if kb not in self.kb_tokens:
                await send_error(send, 404, "not_found", f"no knowledge base named {kb!r} here")
                return
            raw = path.encode()
            scope = {**scope, "path": path, "raw_path": raw, "clawkb_kb": kb}
        tokens = self.kb_tokens[kb or self.settings.name]
        refused = cross_site_reason(scope["method"], path, headers, self.trusted)
        if refused is not None:
            await send_error(send, 403, "cross_site", refused)
            return
        if tokens and not _public(path) and not self._authorized(headers, tokens):
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
        body = BodyReader(receive, limit, self.settings.body_timeout_s, self.settings.body_min_rate)
        await self.app(scope, body.receive, body.wrap(send))

    def _authorized(self, headers: dict[str, str], tokens: list[bytes]) -> bool:
        auth = headers.get("authorization", "")
        scheme, _, value = auth.partition(" ")
        return scheme.lower() == "bearer" and token_ok(value.strip(), tokens)


def _public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


class BodyTooLarge(Exception):
    pass


class BodyTimeout(Exception):
    pass


class BodyReader:
    """The request body as the app reads it, with a size limit and a read deadline.

    The body must arrive within ``timeout`` seconds plus one second per
    ``min_rate`` bytes received (so a large upload on a slow link passes and a
    1-byte/s trickle does not). Past either limit the read fails and the
    response becomes 413 / 408, whatever the app's body parser made of it.
    """

    def __init__(self, receive: Receive, limit: int, timeout: float, min_rate: int) -> None:
        self._receive, self.limit, self.timeout, self.min_rate = receive, limit, timeout, min_rate
        self.seen = 0
        self.done = False
        self.started: float | None = None
        self.verdict: tuple[int, str, str] | None = None

    async def receive(self) -> Message:
        if self.verdict is not None:
            raise (
                BodyTooLarge(self.verdict[2])
                if self.verdict[0] == 413
                else BodyTimeout(self.verdict[2])
            )
        if self.done:  # the body is in: what follows is waiting for a disconnect
            return await self._receive()
        loop = asyncio.get_running_loop()
        if self.started is None:
            self.started = loop.time()
        deadline = self.started + self.timeout + self.seen / max(self.min_rate, 1)
        try:
            msg = await asyncio.wait_for(self._receive(), max(0.0, deadline - loop.time()))
        except TimeoutError:
            message = (
                f"the request body did not arrive in time ({self.seen} bytes after"
                f" {loop.time() - self.started:.0f} s)"
            )
            self.verdict = (408, "timeout", message)
            raise BodyTimeout(message) from None
        if msg["type"] == "http.request":
            self.seen += len(msg.get("body", b""))
            if self.seen > self.limit:
                message = f"the request body is over {self.limit} bytes"
                self.verdict = (413, "too_large", message)
                raise BodyTooLarge(message)
            self.done = not msg.get("more_body", False)
        else:
            self.done = True
        return msg

    def wrap(self, send: Send) -> Send:
        """``send`` that answers the body's verdict instead of what the app made of it."""
        replaced = False

        async def wrapped(msg: Message) -> None:
            nonlocal replaced
            if replaced:
                return
            if msg["type"] == "http.response.start" and self.verdict is not None:
                replaced = True
                status, code, message = self.verdict
                await send_error(send, status, code, message, [(b"connection", b"close")])
                return
            await send(msg)

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
