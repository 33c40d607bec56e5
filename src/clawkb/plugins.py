"""Every kind of plugin is found the same way: an entry-point group.

=====================  ==========================================================
group                  what the entry point names
=====================  ==========================================================
``clawkb.parsers``     a :class:`~clawkb.parsers.base.Parser` class or instance
``clawkb.embedders``   a factory ``(options: Mapping) -> Embedder``
``clawkb.rerankers``   a factory ``(options: Mapping, embedder: Embedder | None) -> Reranker``
``clawkb.llm_clients`` a factory ``(settings: LLMSettings) -> ChatClient``
``clawkb.commands``    a click command of ``clawkb`` (its name is the entry point's)
``clawkb.query_stages`` a stage around the pipeline (:class:`QueryStage`: knowledge, boards)
``clawkb.rank_stages`` a stage over the fused list (:class:`RankStage`: exact, headings)
``clawkb.ingest_hooks`` a class with ``for_kb(kb)`` -> an ingest hook (datasheets, knowledge)
``clawkb.doctor_checks`` a check ``(kb) -> Finding`` run by ``clawkb doctor``
=====================  ==========================================================

clawkb's own implementations are declared in its ``pyproject.toml`` exactly
like third-party ones, so there is one discovery path and ``clawkb plugins``
lists everything with its origin (``built-in`` or the providing distribution).
When two distributions register the same name in a group, a third-party one
wins over the built-in (so a plugin can replace it), and the listing shows both.

Stages and hooks run in their ``order`` (an attribute of the loaded object,
smaller first; built-ins leave gaps). :func:`register` adds one in-process
(origin ``registered``), for an application that embeds clawkb; it wins over
an entry point of the same name.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # importlib.metadata loads only to list plugins or find a rare one
    from importlib.metadata import EntryPoint

    import click

from clawkb.errors import ConfigError

GROUPS = (
    "clawkb.parsers",
    "clawkb.embedders",
    "clawkb.rerankers",
    "clawkb.llm_clients",
    "clawkb.commands",
    "clawkb.query_stages",
    "clawkb.rank_stages",
    "clawkb.ingest_hooks",
    "clawkb.doctor_checks",
    "clawkb.backends",
)
BUILTIN_DISTRIBUTION = "clawkb"
BUILTIN_ORIGIN = "built-in"
REGISTERED_ORIGIN = "registered"
#: The ``order`` of a stage or hook that declares none.
DEFAULT_ORDER = 100

#: In-process registrations: group -> name -> object (see :func:`register`).
_registered: dict[str, dict[str, Any]] = {}


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


def entry_points(group: str) -> tuple[EntryPoint, ...]:
    """``importlib.metadata.entry_points(group=...)``, imported only when asked: a fresh
    CLI start finds its commands and stages through :func:`quick_entry_points`."""
    from importlib.metadata import entry_points as read

    return tuple(read(group=group))


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
    return sorted({ep.name for ep in _entry_points(group)} | set(_registered.get(group, ())))


def _target(obj: object) -> str:
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', type(obj).__name__)}"


def list_plugins(groups: tuple[str, ...] = GROUPS) -> list[PluginInfo]:
    return [
        info
        for group in groups
        for info in [
            *(
                PluginInfo(group, ep.name, origin_of(ep), ep.value)
                for ep in group_entry_points(group)
            ),
            *(
                PluginInfo(group, name, REGISTERED_ORIGIN, _target(obj))
                for name, obj in sorted(_registered.get(group, {}).items())
            ),
        ]
    ]


def register(group: str, name: str, obj: object) -> None:
    """Add ``obj`` as plugin ``name`` of ``group`` in this process (it wins over an entry
    point of the same name); :func:`unregister` takes it back."""
    if group not in GROUPS:
        raise ConfigError(f"unknown plugin group {group!r}; known: {', '.join(GROUPS)}")
    _registered.setdefault(group, {})[name] = obj
    load_group.cache_clear()


def unregister(group: str, name: str) -> None:
    _registered.get(group, {}).pop(name, None)
    load_group.cache_clear()


def order_of(obj: object) -> int:
    return int(getattr(obj, "order", DEFAULT_ORDER))


@functools.cache
def load_group(group: str) -> tuple[tuple[str, Any], ...]:
    """Every plugin of ``group`` as (name, object), the winner per name, by ``order``
    then name. One that cannot be loaded is a :class:`ConfigError` naming it."""
    chosen: dict[str, Any] = {**quick_entry_points(group), **_registered.get(group, {})}
    out = []
    for name, target in chosen.items():
        obj = target
        if isinstance(target, Ref):
            try:
                obj = target.load()
            except Exception as exc:  # a broken plugin: one line naming it, not a traceback
                raise ConfigError(
                    f"{group} plugin {name!r} ({target.value}) cannot be loaded: {exc}"
                ) from exc
        out.append((name, obj))
    return tuple(sorted(out, key=lambda item: (order_of(item[1]), item[0])))


def loaded(group: str) -> list[Any]:
    """The objects of :func:`load_group`, in order."""
    return [obj for _, obj in load_group(group)]


def load_plugin(group: str, name: str, what: str = "plugin") -> Callable[..., object]:
    """The factory entry point ``name`` of ``group`` names (the last registration wins);
    what it makes is the group's contract (docs/plugins.md), which the caller states."""
    mine = _registered.get(group, {})
    obj = mine[name] if name in mine else _load_entry_point(group, name, what)
    if not callable(obj):
        raise ConfigError(f"{what} {name!r} is not a factory (it is {_target(obj)})")
    return obj


@functools.cache
def _load_entry_point(group: str, name: str, what: str) -> object:
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


# -- commands: found without importlib.metadata's full scan ---------------------
_META_DIRS = (".dist-info", ".egg-info")


def _dist_name(folder: str) -> str:
    """The normalised distribution name of a ``name-version.dist-info`` or
    ``name[-version...].egg-info`` folder."""
    stem, kind = folder.rsplit(".", 1)
    kind = "." + kind
    if kind == ".dist-info" or stem.endswith(".dist"):
        stem = stem.removesuffix(".dist")
        name = stem.rsplit("-", 1)[0] if "-" in stem else stem
    else:
        stem = stem.removesuffix(".egg")
        name = stem.split("-", 1)[0]
    return name.replace("-", "_").replace(".", "_").lower()


def _section(text: str, group: str) -> list[tuple[str, str]]:
    """The ``name = value`` lines of ``[group]`` in an ``entry_points.txt``."""
    out, inside = [], False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            inside = line == f"[{group}]"
        elif inside and "=" in line and not line.startswith(("#", ";")):
            name, value = line.split("=", 1)
            out.append((name.strip(), value.strip()))
    return out


@dataclass(frozen=True)
class Ref:
    """An entry point as ``entry_points.txt`` states it: ``module:attr.path``."""

    name: str
    value: str
    group: str

    def load(self) -> object:
        import importlib

        module, _, attrs = self.value.partition(":")
        obj: object = importlib.import_module(module.strip())
        for attr in filter(None, attrs.strip().split(".")):
            obj = getattr(obj, attr)
        return obj


@functools.cache
def quick_entry_points(group: str) -> dict[str, Ref]:
    """``group``'s entry points by name, third-party ones over the built-ins. Read from
    the ``entry_points.txt`` files of the distributions on ``sys.path`` (the first of a
    name wins, as for ``importlib.metadata``): a fresh ``clawkb search`` does not pay
    for reading every distribution's metadata (30-100 ms) to find its stages."""
    import os
    import sys

    marker = f"[{group}]"
    builtin: dict[str, Ref] = {}
    other: dict[str, Ref] = {}
    seen: set[str] = set()
    for entry in sys.path:
        try:
            folders = [d for d in os.scandir(entry or ".") if d.name.endswith(_META_DIRS)]
        except OSError:
            continue
        for d in sorted(folders, key=lambda d: d.name):
            dist = _dist_name(d.name)
            if dist in seen:
                continue
            seen.add(dist)
            try:
                with open(os.path.join(d.path, "entry_points.txt"), encoding="utf-8") as fh:
                    text = fh.read()
            except OSError:
                continue
            if marker not in text:
                continue
            into = builtin if dist == BUILTIN_DISTRIBUTION else other
            for name, value in _section(text, group):
                into[name] = Ref(name, value.split("[", 1)[0].strip(), group)
    return {**builtin, **other}


def command_entry_points() -> dict[str, Ref]:
    return quick_entry_points("clawkb.commands")


def commands() -> dict[str, object]:
    """Command name -> its entry point, or the command :func:`register` added."""
    return {**command_entry_points(), **_registered.get("clawkb.commands", {})}


def load_command(ep: object) -> click.Command:
    """The click command an entry point names (a one-line error when it cannot load)."""
    import click

    obj = ep
    if isinstance(ep, Ref):
        try:
            obj = ep.load()
        except Exception as exc:  # a broken plugin: one line naming it, not a traceback
            raise ConfigError(f"command {ep.name!r} ({ep.value}) cannot be loaded: {exc}") from exc
    if not isinstance(obj, click.Command):
        raise ConfigError(f"command plugin {_target(obj)} is not a click command")
    return obj
