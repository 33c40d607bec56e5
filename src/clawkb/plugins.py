"""Every kind of plugin is found the same way: an entry-point group.

=====================  ==========================================================
group                  what the entry point names
=====================  ==========================================================
``clawkb.parsers``     a :class:`~clawkb.parsers.base.Parser` class or instance
``clawkb.embedders``   a factory ``(options: Mapping) -> Embedder``
``clawkb.rerankers``   a factory ``(options: Mapping, embedder: Embedder | None) -> Reranker``
``clawkb.llm_clients`` a factory ``(settings: LLMSettings) -> ChatClient``
=====================  ==========================================================

clawkb's own implementations are declared in its ``pyproject.toml`` exactly
like third-party ones, so there is one discovery path and ``clawkb plugins``
lists everything with its origin (``built-in`` or the providing distribution).
When two distributions register the same name in a group, a third-party one
wins over the built-in (so a plugin can replace it), and the listing shows both.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from clawkb.errors import ConfigError

GROUPS = ("clawkb.parsers", "clawkb.embedders", "clawkb.rerankers", "clawkb.llm_clients")
BUILTIN_DISTRIBUTION = "clawkb"
BUILTIN_ORIGIN = "built-in"


@dataclass(frozen=True, slots=True)
class PluginInfo:
    group: str
    name: str
    origin: str
    target: str

    def to_dict(self) -> dict[str, str]:
        return {
            "group": self.group,
            "name": self.name,
            "origin": self.origin,
            "target": self.target,
        }


def origin_of(ep: EntryPoint) -> str:
    """``built-in`` for clawkb's own entry points, else ``<distribution> <version>``."""
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "unknown"
    name = dist.metadata["Name"] or "unknown"
    if name.lower() == BUILTIN_DISTRIBUTION:
        return BUILTIN_ORIGIN
    return f"{name} {dist.version}"


def load_order(ep: EntryPoint) -> tuple[int, str, str]:
    """Built-ins first, then other distributions by name: later registrations win."""
    origin = origin_of(ep)
    return (0 if origin == BUILTIN_ORIGIN else 1, origin, ep.name)


#: group -> (the :func:`_path_stamp` it was read at, its entry points)
_FOUND: dict[str, tuple[tuple[Any, ...], tuple[EntryPoint, ...]]] = {}
_FOUND_LOCK = threading.Lock()


def _path_stamp() -> tuple[Any, ...]:
    """``sys.path`` and the modification time of each of its folders: installing or
    removing a distribution changes the time of the folder its metadata lands in."""
    stamp: list[Any] = []
    for entry in sys.path:
        try:
            stamp.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            stamp.append((entry, None))
    return tuple(stamp)


#: Seconds a reading of the entry points is trusted before :func:`_path_stamp` is
#: taken again (a stat per ``sys.path`` folder).
RECHECK_S = 1.0
_checked: dict[str, float] = {}


def _entry_points(group: str) -> tuple[EntryPoint, ...]:
    """The group's entry points. Reading them opens every installed distribution's
    metadata (milliseconds); a server validating each request's options would pay
    that per request, so they are read again only when :func:`_path_stamp` moves
    (looked at no more than once per :data:`RECHECK_S`)."""
    now = time.monotonic()
    with _FOUND_LOCK:
        cached = _FOUND.get(group)
        if cached is not None and now - _checked.get(group, -RECHECK_S) < RECHECK_S:
            return cached[1]
    stamp = _path_stamp()
    if cached is None or cached[0] != stamp:
        cached = (stamp, tuple(entry_points(group=group)))
    with _FOUND_LOCK:
        _FOUND[group] = cached
        _checked[group] = now
    return cached[1]


def group_entry_points(group: str) -> list[EntryPoint]:
    return sorted(_entry_points(group), key=load_order)


def names(group: str) -> list[str]:
    return sorted({ep.name for ep in _entry_points(group)})


def list_plugins(groups: tuple[str, ...] = GROUPS) -> list[PluginInfo]:
    return [
        PluginInfo(group, ep.name, origin_of(ep), ep.value)
        for group in groups
        for ep in group_entry_points(group)
    ]


@functools.cache
def load_plugin(group: str, name: str, what: str = "plugin") -> Any:
    """The object entry point ``name`` of ``group`` names (the last registration wins)."""
    found = [ep for ep in group_entry_points(group) if ep.name == name]
    if not found:
        raise ConfigError(
            f"unknown {what} {name!r}; available: {', '.join(names(group)) or 'none'}"
        )
    ep = found[-1]
    try:
        return ep.load()
    except ImportError as exc:
        raise ConfigError(f"{what} {name!r} ({origin_of(ep)}) cannot be loaded: {exc}") from exc
