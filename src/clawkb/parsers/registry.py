"""Find parsers through the ``clawkb.parsers`` entry-point group (ARCHITECTURE.md, `parsers/`).

Built-in parsers are registered in clawkb's own ``pyproject.toml`` exactly
like third-party ones, so there is one discovery path and ``clawkb plugins``
can list everything with its origin.

Precedence: parsers are registered in a fixed order — clawkb's own entry
points first, then other distributions sorted by (distribution, entry-point
name) — and for an extension or MIME type claimed twice, **the later
registration wins**. So a plugin can replace a built-in parser (say, a
richer Markdown parser) just by claiming ``.md``; the replaced parser stays
listed by :meth:`ParserRegistry.all`. Parsers added with
:meth:`ParserRegistry.register` come after all entry points.

A plugin that fails to import or does not look like a parser never breaks
the registry: it is listed with ``error`` set and otherwise ignored.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import PurePath

from clawkb.parsers.base import Parser
from clawkb.plugins import BUILTIN_ORIGIN
from clawkb.plugins import load_order as _load_order
from clawkb.plugins import origin_of as _origin

GROUP = "clawkb.parsers"
__all__ = ["BUILTIN_ORIGIN", "GROUP", "ParserInfo", "ParserRegistry", "default_registry"]


@dataclass(frozen=True, slots=True)
class ParserInfo:
    """What ``clawkb plugins`` shows for one registered (or broken) parser."""

    name: str
    extensions: tuple[str, ...]
    mime_types: tuple[str, ...]
    origin: str
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class ParserRegistry:
    """Parsers by name, extension and MIME type."""

    def __init__(self, eps: Iterable[EntryPoint] | None = None) -> None:
        """Load ``eps`` (default: the installed ``clawkb.parsers`` entry points)."""
        self._infos: list[ParserInfo] = []
        self._by_name: dict[str, Parser] = {}
        self._by_ext: dict[str, Parser] = {}
        self._by_mime: dict[str, Parser] = {}
        self._by_filename: dict[str, Parser] = {}
        chosen = list(entry_points(group=GROUP)) if eps is None else list(eps)
        for ep in sorted(chosen, key=_load_order):
            self._load(ep)

    def register(self, parser: Parser, origin: str = "runtime") -> None:
        """Add a parser instance; it overrides earlier claims on its extensions."""
        exts = tuple(ext.lower() for ext in parser.extensions)
        mimes = tuple(mime.lower() for mime in parser.mime_types)
        self._infos.append(ParserInfo(parser.name, exts, mimes, origin))
        self._by_name[parser.name] = parser
        self._by_ext.update(dict.fromkeys(exts, parser))
        self._by_mime.update(dict.fromkeys(mimes, parser))
        names = tuple(n.lower() for n in getattr(parser, "filenames", ()) or ())
        self._by_filename.update(dict.fromkeys(names, parser))

    def for_path(self, path: str | PurePath) -> Parser | None:
        """The parser for ``path``'s lower-case extension (or exact file name, for
        parsers that list ``filenames`` such as ``mbox``), or ``None``."""
        pure = PurePath(path)
        suffix = pure.suffix.lower()
        if suffix:
            return self._by_ext.get(suffix)
        return self._by_filename.get(pure.name.lower()) if self._by_filename else None

    def for_mime(self, mime_type: str) -> Parser | None:
        return self._by_mime.get(mime_type.split(";")[0].strip().lower())

    def by_name(self, name: str) -> Parser | None:
        return self._by_name.get(name)

    def all(self) -> list[ParserInfo]:
        """Every registration in load order, broken plugins included."""
        return list(self._infos)

    def errors(self) -> list[ParserInfo]:
        return [info for info in self._infos if not info.ok]

    def extensions(self) -> frozenset[str]:
        """Extensions some parser claims (what discovery should pick up)."""
        return frozenset(self._by_ext)

    def _load(self, ep: EntryPoint) -> None:
        origin = _origin(ep)
        try:
            loaded = ep.load()
            parser = loaded() if isinstance(loaded, type) else loaded
        except Exception as exc:  # a plugin may fail in any way; keep going
            reason = f"cannot load {ep.value}: {type(exc).__name__}: {exc}"
            self._infos.append(ParserInfo(ep.name, (), (), origin, reason))
            return
        problem = _interface_problem(parser)
        if problem is not None:
            self._infos.append(ParserInfo(ep.name, (), (), origin, f"{ep.value}: {problem}"))
            return
        self.register(parser, origin)


def install_hint(parser: object) -> str | None:
    """``"not installed: pip install 'clawkb[pdf]'"`` when a module ``parser`` requires is
    missing (checked without importing it), else ``None``."""
    missing = [m for m in getattr(parser, "requires", ()) if not _importable(m)]
    if not missing:
        return None
    extra = getattr(parser, "extra", None)
    if extra:
        return f"not installed: pip install 'clawkb[{extra}]'"
    return f"not installed: needs {', '.join(missing)}"


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@functools.cache
def default_registry() -> ParserRegistry:
    """The registry of installed parsers, built once per process."""
    return ParserRegistry()


def _interface_problem(obj: object) -> str | None:
    """Say what is wrong if ``obj`` does not satisfy the parser interface."""
    if not isinstance(obj, Parser):
        return "not a parser (needs name, extensions, mime_types and parse())"
    if not isinstance(obj.name, str) or not obj.name:
        return "parser name must be a non-empty string"
    exts = obj.extensions
    if isinstance(exts, str) or not all(isinstance(e, str) and e.startswith(".") for e in exts):
        return "extensions must be a tuple of strings starting with '.'"
    return None
