"""Shared pieces of the store/index safety tests: a small corpus and a searcher loop."""

from __future__ import annotations

import json
import random
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

WORDS = [f"filler{i}" for i in range(400)]


def unique(i: int) -> str:
    return f"needle{i:03d}q"


def write_doc(root: Path, i: int, version: int, rng: random.Random) -> Path:
    """A file whose unique word survives every rewrite; the rest of its text changes."""
    path = root / f"doc{i:03d}.md"
    paras = []
    for p in range(6):
        words = rng.choices(WORDS, k=60)
        if p == 2:
            words.append(unique(i))
        paras.append(" ".join(words) + f" version{version}")
    path.write_text(f"# Doc {i}\n\n" + "\n\n".join(paras) + "\n", encoding="utf-8")
    return path


def make_corpus(root: Path, n: int, seed: int = 7) -> list[int]:
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        write_doc(root, i, 0, rng)
    return list(range(n))


def search_loop(
    home: str, ids: list[int], seconds: float, stop_file: str | None = None, pause: float = 0.0
) -> dict:
    """Search each file's unique word until time is up; count empties and errors."""
    from clawkb.kb import KnowledgeBase

    done = empty = errors = 0
    first_error = ""
    end = time.monotonic() + seconds
    rng = random.Random()
    with KnowledgeBase.open(home) as kb:
        while time.monotonic() < end:
            if stop_file and Path(stop_file).exists():
                break
            i = rng.choice(ids)
            try:
                res = kb.search(unique(i), limit=3)
                done += 1
                if not any(h.anchor.path.endswith(f"doc{i:03d}.md") for h in res.hits):
                    empty += 1
            except Exception as exc:  # counted: the test asserts there are none
                errors += 1
                first_error = first_error or f"{type(exc).__name__}: {exc}"
            if pause:
                time.sleep(pause)  # leave the shared cores to the writers
    return {"done": done, "empty": empty, "errors": errors, "first_error": first_error}


def indexed_kb(tmp_path: Path, n: int, config: str = "") -> tuple[Path, list[int]]:
    """A KB in ``tmp_path/kb`` with ``n`` corpus files (in ``tmp_path/notes``) indexed."""
    from clawkb.kb import KnowledgeBase

    ids = make_corpus(tmp_path / "notes", n)
    home = tmp_path / "kb"
    home.mkdir()
    if config:
        (home / "config.yaml").write_text(config, "utf-8")
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([tmp_path / "notes"])
    return home, ids


def kill_when(proc: Any, ready: Callable[[], bool], what: str) -> None:
    """SIGKILL ``proc`` as soon as ``ready()``; fails if it finished before that."""
    deadline = time.monotonic() + 120
    while proc.poll() is None and not ready() and time.monotonic() < deadline:
        time.sleep(0.002)
    alive = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert alive, f"{what} finished before the kill point"


if __name__ == "__main__":  # a searcher process: home, seconds, ids (json), stop file[, pause]
    pause = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    out = search_loop(sys.argv[1], json.loads(sys.argv[3]), float(sys.argv[2]), sys.argv[4], pause)
    print(json.dumps(out))


def uart_notes_kb(root: Path) -> Path:
    """A KB (``root/kb``) of 12 short notes on UARTs, DDR4 impedance and pull-ups, all
    indexed in one run (one segment); returns its home."""
    from clawkb import KnowledgeBase

    docs = root / "docs"
    docs.mkdir()
    for i in range(12):
        (docs / f"n{i}.md").write_text(
            f"# Note {i}\n\nThe UART{i} runs at {115200 * (i + 1)} baud; DDR4 impedance"
            f" is {40 + i} ohm. I2C{i} needs pull-ups of {i}.7k.\n",
            encoding="utf-8",
        )
    with KnowledgeBase.open(root / "kb", create=True) as kb:
        kb.index([docs])
    return root / "kb"
