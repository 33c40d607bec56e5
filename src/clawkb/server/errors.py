"""One error shape for every endpoint: ``{"code": "...", "message": "..."}``.

``code`` is stable and machine-readable; ``message`` is the same one line the
CLI prints. Domain errors map by class; anything unexpected is ``internal``
(its details go to the log, not the client).
"""

from __future__ import annotations

import logging
from typing import Any

from clawkb.errors import (
    ClawkbError,
    ConfigError,
    LockedError,
    MissingDependencyError,
    NotFoundError,
    ParseError,
    StoreError,
    validation_line,
)

log = logging.getLogger("clawkb.server")


def error_for(exc: BaseException) -> tuple[int, str, str]:
    """(HTTP status, code, message) for an exception."""
    from clawkb.server.api_write import UploadTooLarge
    from clawkb.server.ask import RateLimited
    from clawkb.server.security import BodyTimeout, BodyTooLarge, PathOutsideRoots

    if isinstance(exc, RateLimited):
        return 429, "rate_limited", str(exc)
    if isinstance(exc, BodyTooLarge | UploadTooLarge):
        return 413, "too_large", str(exc)
    if isinstance(exc, BodyTimeout):
        return 408, "timeout", str(exc)
    if isinstance(exc, PathOutsideRoots):
        return 403, "outside_roots", str(exc)
    if isinstance(exc, NotFoundError):
        return 404, "not_found", str(exc)
    if isinstance(exc, LockedError):
        return 503, "locked", str(exc)
    if isinstance(exc, MissingDependencyError):
        return 501, "missing_dependency", str(exc)
    if isinstance(exc, ConfigError | ParseError):
        return 400, "bad_request", str(exc)
    if isinstance(exc, StoreError):
        return 500, "store_error", str(exc)
    if type(exc).__name__ == "LLMError":
        return 502, "llm_error", str(exc)
    if isinstance(exc, ClawkbError):
        return 400, "error", str(exc)
    log.error("unexpected error", exc_info=exc)
    return 500, "internal", f"internal error ({type(exc).__name__}); see the server log"


def validation_message(errors: list[dict[str, Any]]) -> str:
    """FastAPI's validation errors as one line: ``field: what is wrong``."""
    return validation_line(errors, skip=("body", "query", "path"))
