"""The server's glibc heap policy (clawkb.server.heap): arenas capped, free pages
trimmed after writes at most every few seconds, off on request; a no-op without glibc."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from clawkb.server import heap

glibc = pytest.mark.skipif(heap._glibc() is None, reason="needs glibc (Linux)")

_THREADS = """
import threading
from clawkb.server import heap
applied = heap.configure()
keep = []
def work():
    for _ in range(200):
        keep.append(bytearray(3000))
threads = [threading.Thread(target=work) for _ in range(12)]
[t.start() for t in threads]
[t.join() for t in threads]
print(applied, heap.stats()["arenas"])
"""


def _run(env: dict[str, str]) -> tuple[str, int]:
    clean = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "CLAWKB_MALLOC")}
    out = subprocess.run(
        [sys.executable, "-c", _THREADS], env={**clean, **env}, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    applied, arenas = out.stdout.split()
    return applied, int(arenas)


@glibc
def test_configure_caps_the_arenas_of_many_threads() -> None:
    applied, arenas = _run({})
    assert applied == "True" and arenas <= heap.ARENAS + 1  # +1: one made before the cap
    off, _ = _run({"CLAWKB_MALLOC": "off"})
    assert off == "False"
    users, _ = _run({"MALLOC_ARENA_MAX": "4"})
    assert users == "False"  # the user's own setting wins


@glibc
def test_after_write_trims_at_most_every_few_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    from clawkb import memo

    monkeypatch.delenv("CLAWKB_MALLOC", raising=False)
    monkeypatch.setattr(heap, "_last_trim", [0.0])
    before = memo.generation()
    assert heap.after_write() is True
    assert heap.after_write() is False  # within TRIM_EVERY
    assert memo.generation() == before + 2  # every write ages the memos
    monkeypatch.setattr(heap, "_last_trim", [0.0])
    monkeypatch.setenv("CLAWKB_MALLOC", "arenas")
    assert heap.after_write() is False
    stats = heap.stats()
    assert stats is not None and stats["arenas"] >= 1 and stats["system"] > stats["free"] >= 0


def test_a_state_of_the_kb_counts_as_one_generation_whoever_sees_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``saw_change``: the first view (or the write) that reports a state of the KB
    ages the memos; the other views renewing onto the same state do not."""
    from clawkb import memo

    monkeypatch.setattr(heap, "_seen", [None])
    monkeypatch.setattr(heap, "_last_trim", [0.0])
    before = memo.generation()
    assert heap.saw_change((1, 1)) is True
    assert heap.saw_change((1, 1)) is False  # a second view on the same state
    assert heap.saw_change((1, 2)) is True  # another process committed
    assert memo.generation() == before + 2
