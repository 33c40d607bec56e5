"""Every error clawkb raises on purpose derives from :class:`ClawkbError`.

::

    ClawkbError                  status code             meaning
    ├── ConfigError              400 bad_request         bad configuration or command-line value
    │   ├── PathOutsideRoots     403 outside_roots       a path resolves outside every served root
    │   └── UploadTooLarge       413 too_large           an upload over the server's limit
    ├── StoreError               500 store_error         the knowledge-base store cannot be used
    │   ├── SchemaTooNewError                            the KB was written by a newer clawkb
    │   └── LockedError          503 locked              another process holds the write lock
    ├── IndexError_              400 error               a derived index is missing or inconsistent
    │   ├── IndexCorruptError                            an index file is truncated or fails its checksum
    │   └── DenseDamaged                                 a vector file does not match its manifest
    ├── ParseError               400 bad_request         one file could not be parsed (names the file)
    │   ├── UnsupportedFileError                         no parser claims it / binary content
    │   ├── DecodeError                                  bytes cannot be decoded as text
    │   ├── UnsafeFileError                              over a safety limit (zip bomb, XML entities, depth)
    │   └── FormatMismatchError                          content is not what the extension claims
    ├── NotFoundError            404 not_found           an anchor, document or dataset does not exist
    ├── MissingDependencyError   501 missing_dependency  an optional extra is needed (names the extra)
    └── EndpointError            502 endpoint_error      a remote model endpoint failed or answered nonsense
        ├── LLMError                 llm_error           the language model failed or answered nonsense
        └── BackendError             backend_error       the Milvus backend is unreachable or incompatible

Each class carries what the front ends need as class attributes: ``http_status``
and ``code`` (the HTTP layer's status and machine-readable code) and
``exit_code`` (the CLI's exit status, docs/cli.md). A subclass inherits its
parent's unless it says otherwise; front ends read the attributes and never
match classes by name.
"""

from __future__ import annotations

from typing import Any, ClassVar

#: CLI exit status of an error (docs/cli.md: 0 done, 1 nothing found, 2 error, 3 partial).
EXIT_ERROR = 2


class ClawkbError(Exception):
    """Base class of all deliberate clawkb errors."""

    http_status: ClassVar[int] = 400
    code: ClassVar[str] = "error"
    exit_code: ClassVar[int] = EXIT_ERROR


class ConfigError(ClawkbError):
    code = "bad_request"


class PathOutsideRoots(ConfigError):
    """A path that resolves outside every served root (``..``, absolute, symlink)."""

    http_status = 403
    code = "outside_roots"


class UploadTooLarge(ConfigError):
    """An upload larger than the server accepts."""

    http_status = 413
    code = "too_large"


class StoreError(ClawkbError):
    http_status = 500
    code = "store_error"


class SchemaTooNewError(StoreError):
    pass


class LockedError(StoreError):
    http_status = 503
    code = "locked"


class IndexError_(ClawkbError):
    pass


class IndexCorruptError(IndexError_):
    """A file of the index is missing, truncated or does not match its checksum,
    or a search found a segment's arrays contradicting each other."""


class DenseDamaged(IndexError_):
    """A dense vector file does not match its manifest (``meta.json``)."""


class ParseError(ClawkbError):
    """A single file failed to parse; ``path`` names it, the message says why."""

    code = "bad_request"

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
    http_status = 404
    code = "not_found"


class MissingDependencyError(ClawkbError):
    http_status = 501
    code = "missing_dependency"

    def __init__(self, what: str, extra: str) -> None:
        super().__init__(f"{what} needs an optional dependency: pip install 'clawkb[{extra}]'")
        self.extra = extra


class EndpointError(ClawkbError):
    """A remote model endpoint failed or answered nonsense."""

    http_status = 502
    code = "endpoint_error"


class LLMError(EndpointError):
    """The language model endpoint failed or answered something unusable."""

    code = "llm_error"


class BackendError(EndpointError):
    """The Milvus backend is unreachable, misconfigured or incompatible."""

    code = "backend_error"


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


class WriterDied(ClawkbError):
    """The server's writer process ended during a job; the job did not finish."""

    http_status = 503
    code = "writer_died"
