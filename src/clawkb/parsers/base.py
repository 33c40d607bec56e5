"""The parser interface (ARCHITECTURE.md, `parsers/`).

A parser is a class with a ``name``, the file ``extensions`` and ``mime_types``
it claims, and a ``parse(data, path)`` method that turns raw bytes into a
:class:`~clawkb.types.ParsedDocument`. Parsers are registered through the
``clawkb.parsers`` entry-point group; built-ins are registered the same way.

Optional class attributes:

* ``version = "2"``: the version of what ``parse`` returns (default ``"1"``).
  Every stored document records its parser's name and version; bump the
  version when a change gives different slices for the same bytes, and the
  next ``clawkb index`` re-parses files stored by the older version even when
  they did not change on disk. A parser whose output depends on another
  parser (``compressed``) may define ``version_for(path)`` instead;

* ``isolate = True``: parse in a forked, sandboxed worker under the time
  limit (:mod:`clawkb.parsers.limits`) — for formats parsed by C code or
  complex libraries from untrusted bytes;
* ``preload()``: for an isolated parser, called in the parent before each
  fork (must be cheap after the first call): import heavy libraries there
  once, so every worker inherits them instead of importing them again;
* ``filenames = ("mbox",)``: exact extensionless file names the parser
  claims (lower-case);
* ``requires = ("module", ...)`` and ``extra = "name"``: modules the parser
  imports at parse time; when one is missing, ``clawkb parsers`` shows
  ``not installed: pip install 'clawkb[name]'`` (and ``parse`` raises
  :class:`~clawkb.errors.MissingDependencyError`).
"""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

from clawkb.types import ParsedDocument


@runtime_checkable
class Parser(Protocol):
    name: ClassVar[str]
    extensions: ClassVar[tuple[str, ...]]  # lower-case, with the dot: (".md",)
    mime_types: ClassVar[tuple[str, ...]]

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        """Parse one file. Raise :class:`clawkb.errors.ParseError` naming ``path``."""
        ...


#: The version of a parser that does not say (plugins written before versions).
DEFAULT_VERSION = "1"


def parser_version(parser: object, path: str) -> str:
    """The version string recorded for ``path`` parsed by ``parser`` (see above)."""
    version_for = getattr(parser, "version_for", None)
    if callable(version_for):
        return str(version_for(path))
    version = getattr(parser, "version", None)
    return DEFAULT_VERSION if version is None or version == "" else str(version)
