"""How long a serving process's threads hold the GIL before another thread gets a turn.

A serving process runs its searches on reader threads (``runtime.READER_THREADS``)
and its event loop on one more thread, all under one GIL. CPython makes a
thread that holds the GIL give it up only every ``sys.getswitchinterval()``
seconds (5 ms by default) unless it blocks first. Under load that interval is
what a request waits for at each hand-off: the event loop waits up to 5 ms to
read a request, and again to send each answer a reader thread finished, while
the other readers take their 5-ms turns. In the soak (bench/soak.py, 8 readers
on two `serve --workers` processes, 2 cores) a 1-ms interval gave 18 % more
searches and a client p99 of 66 ms instead of 88 in 300-s runs one after the
other (bench/results/soak-latest.md, round 14).

:func:`configure` sets :data:`INTERVAL_MS` for the process at the start of a
server runtime. ``CLAWKB_GIL_SWITCH_MS`` sets another interval in milliseconds
(for measurements; ``5`` is Python's own).
"""

from __future__ import annotations

import logging
import os
import sys

#: The serving processes' switch interval, in milliseconds.
INTERVAL_MS = 1.0

log = logging.getLogger(__name__)


def wanted_ms() -> float:
    """The interval this process should use: ``CLAWKB_GIL_SWITCH_MS`` when it is a
    positive number of milliseconds (a bad value is logged and ignored)."""
    raw = os.environ.get("CLAWKB_GIL_SWITCH_MS", "").strip()
    if not raw:
        return INTERVAL_MS
    try:
        ms = float(raw)
    except ValueError:
        ms = -1.0
    if not 0.0 < ms <= 1000.0:  # NaN fails this too
        log.warning(
            "CLAWKB_GIL_SWITCH_MS=%r is not a number of milliseconds in (0, 1000]: using %g",
            raw,
            INTERVAL_MS,
        )
        return INTERVAL_MS
    return ms


def configure() -> float:
    """Set this process's switch interval; returns it in seconds."""
    sys.setswitchinterval(wanted_ms() / 1000.0)
    return sys.getswitchinterval()
