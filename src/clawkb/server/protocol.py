"""uvicorn's HTTP/1.1 protocol with a deadline for a request's headers.

uvicorn closes an idle keep-alive connection, but a connection that never
sends a complete request line and headers (a half-open socket, a slowloris
client sending one header byte at a time) is held forever. Here every
connection must deliver a request's headers within ``header_timeout``
seconds of opening, or of the previous response; otherwise it is closed.
The body's own deadline is :class:`clawkb.server.security.BodyReader`'s.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class HeaderTimeoutProtocol(H11Protocol):
    header_timeout = 10.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_late)

    def _headers_late(self) -> None:
        self._header_timer = None
        # IDLE: the request line and headers are not (all) in yet.
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def protocol_class(header_timeout: float) -> type[Any]:
    """The protocol class for uvicorn's ``http=`` with this header deadline."""
    return type(
        "HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), {"header_timeout": header_timeout}
    )
