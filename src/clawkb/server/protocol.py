"""uvicorn's HTTP/1.1 protocol with a deadline for a request's headers.

uvicorn closes an idle keep-alive connection, but a connection that never
sends a complete request line and headers (a half-open socket, a slowloris
client sending one header byte at a time) is held forever. Here every
connection must deliver a request's headers within ``header_timeout``
seconds of opening, or of the previous response; otherwise it is closed.
The body's own deadline is :class:`clawkb.server.security.BodyReader`'s.

Two parsers, the same deadline: ``httptools`` (C, llhttp) when it is installed
(a dependency of the server extra), else ``h11`` (pure Python). A search
request's parsing and response writing cost about a third less server CPU with
``httptools`` (bench/results/serve-cpu.md); ``CLAWKB_HTTP=h11`` keeps the pure
Python one (for measurements). The httptools protocol also keeps the
connections of ``serve --workers`` even over the workers (server/balance.py).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from clawkb.server import balance


class _Deadline:
    """The header deadline, mixed into either parser's protocol: armed when a
    connection opens and after each response, disarmed by a request's complete
    headers; the subclass says whether they are in (:meth:`_headers_in`)."""

    header_timeout = 10.0
    _header_timer: asyncio.TimerHandle | None = None
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport

    def _arm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_late)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if not self._headers_in() and not self.transport.is_closing():
            self.transport.close()

    def _headers_in(self) -> bool:
        raise NotImplementedError


class HeaderTimeoutProtocol(_Deadline, H11Protocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def _headers_in(self) -> bool:
        # IDLE: the request line and headers are not (all) in yet
        return self.conn.their_state is not h11.IDLE


def _httptools_class() -> type[Any] | None:
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is not installed
        return None

    class FastHeaderTimeoutProtocol(_Deadline, HttpToolsProtocol):
        _have_headers = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            balance.opened()
            self._have_headers = False
            self._arm_header_timer()

        def on_headers_complete(self) -> None:
            self._have_headers = True
            super().on_headers_complete()
            if self.cycle is not None and self.cycle.keep_alive and balance.over_share():
                self.cycle.keep_alive = False  # answered with Connection: close (balance.py)

        def on_response_complete(self) -> None:
            pipelined = bool(self.pipeline)  # the next request's headers came in already
            super().on_response_complete()
            self._have_headers = pipelined
            self._arm_header_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_header_timer()
            balance.closed()
            super().connection_lost(exc)

        def _headers_in(self) -> bool:
            return self._have_headers

    return FastHeaderTimeoutProtocol


def protocol_class(header_timeout: float) -> type[Any]:
    """The protocol class for uvicorn's ``http=`` with this header deadline:
    httptools' unless it is missing or ``CLAWKB_HTTP=h11``."""
    fast = _httptools_class() if os.environ.get("CLAWKB_HTTP", "").lower() != "h11" else None
    base = fast or HeaderTimeoutProtocol
    return type(base.__name__, (base,), {"header_timeout": header_timeout})
