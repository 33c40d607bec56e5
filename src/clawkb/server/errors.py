"""One error shape for every endpoint: ``{"code": "...", "message": "..."}``.

``code`` is stable and machine-readable; ``message`` is the same one line the
CLI prints. Domain errors carry their own status and code; anything unexpected is ``internal``
(its details go to the log, not the client).
"""

from __future__ import annotations

import logging
from typing import Any

from clawkb.errors import ClawkbError, validation_line

log = logging.getLogger("clawkb.server")


def error_for(exc: BaseException) -> tuple[int, str, str]:
    """(HTTP status, code, message) for an exception.

    Domain errors carry their status and code (:mod:`clawkb.errors`); the
    server-only refusals below are not domain errors.
    """
    from clawkb.server.ask import RateLimited
    from clawkb.server.security import BodyTimeout, BodyTooLarge

    if isinstance(exc, RateLimited):
        return 429, "rate_limited", str(exc)
    if isinstance(exc, BodyTooLarge):
        return 413, "too_large", str(exc)
    if isinstance(exc, BodyTimeout):
        return 408, "timeout", str(exc)
    if isinstance(exc, ClawkbError):
        return exc.http_status, exc.code, str(exc)
    log.error("unexpected error", exc_info=exc)
    return 500, "internal", f"internal error ({type(exc).__name__}); see the server log"


def validation_message(errors: list[dict[str, Any]]) -> str:
    """FastAPI's validation errors as one line: ``field: what is wrong``."""
    return validation_line(errors, skip=("body", "query", "path"))
