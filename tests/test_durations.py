"""One duration reader for every option that takes a length of time."""

from __future__ import annotations

import pytest

from clawkb.durations import parse_duration
from clawkb.errors import ConfigError
from clawkb.memory import parse_ttl
from clawkb.retrieve.filters import parse_time

DAY = 86400.0


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("90s", 90.0),
        ("30m", 1800.0),
        ("1.5h", 5400.0),
        ("1.5 H", 5400.0),
        ("7d", 7 * DAY),
        ("2w", 14 * DAY),
        ("6mo", 180 * DAY),
        ("1y", 365 * DAY),
    ],
)
def test_units(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "d", "-5m", "3 days", "1e3s", "5x"])
def test_bad_durations_name_the_forms(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"e\.g\. 90s, 30m, 12h, 7d, 2w, 6mo, 1y"):
        parse_duration(bad, "ttl")


def test_since_and_ttl_read_units_the_same_way() -> None:
    # `m` used to mean months for --since and minutes for --ttl
    now = 1_000_000_000.0
    assert parse_time("90m", now=now) == now - parse_ttl("90m") == now - 5400.0
    assert parse_time("6mo", now=now) == now - parse_ttl("6mo") == now - 180 * DAY
    assert parse_time("2w", now=now) == now - parse_ttl("2w")
    with pytest.raises(ConfigError, match="bad time"):
        parse_time("soon")
