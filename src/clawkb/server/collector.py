"""Python's cyclic garbage collector in a serving process: no full collection that
stops every request for a tenth of a second.

A full (generation 2) collection walks every container object the process holds,
and a serving process holds large ones from its first search on: the tokenizer's
word tables, the models' vocabularies, the loaded modules. Walking them took
90-115 ms per full collection in a `serve` under the soak's load, and a
collection holds the GIL: every search in flight then waits that long.

Those objects live as long as the process. :func:`freeze_now` (at a server's
start, after its warm-up search: ``Runtime.warm``) or else :func:`after_search`
(after the first search) moves everything alive then into the collector's
permanent generation
(``gc.freeze()``, after one last full collection so no garbage is kept), and
later full collections walk only what was made since: microseconds instead of a
tenth of a second. Objects made later are collected as always.
``CLAWKB_GC_FREEZE=0`` leaves the collector as Python sets it (for measurements).
:func:`before_fork` freezes what the parent of ``serve --workers`` imported, so
the workers start with it frozen too (and do not write to the pages they share
with the parent when they collect).
"""

from __future__ import annotations

import gc
import os
import threading

_state = {"frozen": False}
_lock = threading.Lock()


def enabled() -> bool:
    return os.environ.get("CLAWKB_GC_FREEZE", "1") != "0"


def after_search() -> None:
    """Called after each search: the first one freezes what the process holds then
    (a thread of its own does it, so that search's answer is not held back)."""
    if _state["frozen"]:
        return
    with _lock:
        if _state["frozen"]:
            return
        _state["frozen"] = True
    if enabled():
        threading.Thread(target=_freeze, name="clawkb-gc-freeze", daemon=True).start()


def freeze_now() -> None:
    """At a server's start, after its warm-up search: what it holds now is frozen
    here, on this thread, instead of by a thread of its own during the first
    request (a full collection holds the GIL for a tenth of a second)."""
    with _lock:
        if _state["frozen"]:
            return
        _state["frozen"] = True
    if enabled():
        _freeze()


def _freeze() -> None:
    gc.collect()
    gc.freeze()


def before_fork() -> None:
    """In the parent of ``serve --workers``, before it forks its workers."""
    if enabled():
        gc.collect()
        gc.freeze()


def frozen() -> int:
    """Objects in the permanent generation (0: nothing frozen)."""
    return gc.get_freeze_count()
