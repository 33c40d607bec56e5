"""Every error clawkb raises on purpose derives from :class:`ClawkbError`.

::

    ClawkbError
    ├── ConfigError            bad configuration or command-line value
    ├── StoreError             the knowledge-base store cannot be used
    │   ├── SchemaTooNewError  the KB was written by a newer clawkb
    │   └── LockedError        another process holds the write lock
    ├── IndexError_            a derived index is missing or inconsistent
    ├── ParseError             one file could not be parsed (names the file)
    │   ├── UnsupportedFileError   no parser claims it / binary content
    │   ├── DecodeError            bytes cannot be decoded as text
    │   ├── UnsafeFileError        over a safety limit (zip bomb, XML entities, depth)
    │   └── FormatMismatchError    content is not what the extension claims
    ├── NotFoundError          an anchor, document or dataset does not exist
    └── MissingDependencyError an optional extra is needed (names the extra)

The CLI maps each to a one-line message and a non-zero exit code.
"""

from __future__ import annotations

from typing import Any


class ClawkbError(Exception):
    """Base class of all deliberate clawkb errors."""


class ConfigError(ClawkbError):
    pass


class StoreError(ClawkbError):
    pass


class SchemaTooNewError(StoreError):
    pass


class LockedError(StoreError):
    pass


class IndexError_(ClawkbError):
    pass


class ParseError(ClawkbError):
    """A single file failed to parse; ``path`` names it, the message says why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class UnsupportedFileError(ParseError):
    pass


class DecodeError(ParseError):
    pass


class UnsafeFileError(ParseError):
    """A file exceeds a safety limit (zip bomb, entity expansion, nesting, size)."""


class FormatMismatchError(ParseError):
    """The bytes are another format than the file extension claims."""


class NotFoundError(ClawkbError):
    pass


class MissingDependencyError(ClawkbError):
    def __init__(self, what: str, extra: str) -> None:
        super().__init__(f"{what} needs an optional dependency: pip install 'clawkb[{extra}]'")
        self.extra = extra


def validation_line(errors: list[dict[str, Any]], *, skip: tuple[str, ...] = ()) -> str:
    """Validation errors (pydantic's ``errors()`` shape) as one line: ``field: what is wrong``.

    Used where a schema rejects arguments before clawkb sees them (HTTP
    parameters, MCP tool arguments): no input echo, no documentation URLs.
    ``skip`` drops location parts that name the container (``body``, ``query``).
    """
    parts = []
    for e in errors[:3]:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x not in skip)
        msg = " ".join(str(e.get("msg", "invalid")).split())
        parts.append(f"{loc or 'request'}: {msg}")
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(parts) + more
