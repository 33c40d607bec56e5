"""The one way clawkb reads a length of time (``--since 30d``, ``--ttl 12h``, ...).

``parse_duration`` accepts a plain number of seconds (``3600``, ``90.5``) or a
number with one unit, case-insensitive, spaces allowed (``1.5 h``):

====  ==================
unit  seconds
====  ==================
s     1
m     60 (minutes)
h     3 600
d     86 400
w     7 days
mo    30 days
y     365 days
====  ==================

``m`` is always minutes; months are ``mo``. Anything else — including NaN,
infinity and anything longer than :data:`MAX_SECONDS` (1000 years) — is a :class:`~clawkb.errors.ConfigError` whose message lists
the forms above.
"""

from __future__ import annotations

import math
import re

from clawkb.errors import ConfigError

UNITS = {
    "": 1.0,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 7 * 86400.0,
    "mo": 30 * 86400.0,
    "y": 365 * 86400.0,
}
#: The longest duration accepted: 1000 years (longer ones overflow date arithmetic).
MAX_SECONDS = 1000 * 365 * 86400.0
FORMS = "a number of seconds or e.g. 90s, 30m, 12h, 7d, 2w, 6mo, 1y"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(mo|[smhdwy]?)\s*$", re.IGNORECASE)


def parse_duration(value: str | float | int, what: str = "duration") -> float:
    """Seconds in ``value``; raises ConfigError naming ``what`` when it is not a duration."""
    if isinstance(value, bool):
        raise ConfigError(f"{what} {value!r}: write {FORMS}")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        m = _DURATION.match(value)
        if not m:
            raise ConfigError(f"{what} {value!r}: write {FORMS}")
        seconds = float(m.group(1)) * UNITS[m.group(2).lower()]
    if not math.isfinite(seconds):
        raise ConfigError(f"{what} {value!r}: write {FORMS}")
    if abs(seconds) > MAX_SECONDS:
        raise ConfigError(f"{what} {value!r} is too long: at most 1000 years (1000y)")
    return seconds


def is_duration(value: str) -> bool:
    return _DURATION.match(value) is not None
