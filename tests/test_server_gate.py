"""The server's readers-writer gate: writes exclude reads, and neither side starves."""

from __future__ import annotations

import threading
import time

from clawkb.server.runtime import Gate


def test_writes_exclude_reads_and_readers_get_turns_between_writes() -> None:
    gate = Gate()
    state = {"readers": 0, "writing": False, "reads": 0, "writes": 0}
    lock = threading.Lock()
    stop = time.monotonic() + 1.0
    problems: list[str] = []

    def reader() -> None:
        while time.monotonic() < stop:
            with gate.read():
                with lock:
                    if state["writing"]:
                        problems.append("read during write")
                    state["readers"] += 1
                time.sleep(0.001)
                with lock:
                    state["readers"] -= 1
                    state["reads"] += 1

    def writer() -> None:
        while time.monotonic() < stop:
            with gate.write():
                with lock:
                    if state["readers"] or state["writing"]:
                        problems.append("write during read")
                    state["writing"] = True
                time.sleep(0.005)
                with lock:
                    state["writing"] = False
                    state["writes"] += 1

    threads = [threading.Thread(target=reader) for _ in range(8)] + [
        threading.Thread(target=writer)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not problems
    # a busy writer does not starve readers, and many readers do not starve the writer
    assert state["writes"] >= 10 and state["reads"] >= 8 * state["writes"] // 4
