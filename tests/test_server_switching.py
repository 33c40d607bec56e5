"""The serving process's GIL switch interval (clawkb.server.switching): 1 ms in a real
server, reported in /metrics, changed by ``CLAWKB_GIL_SWITCH_MS``, a bad value ignored
with a warning."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from clawkb.server import switching
from server_helpers import make_kb, serving


def _gauge(text: str) -> float:
    m = re.search(r"^clawkb_gil_switch_interval_seconds (\S+)$", text, re.M)
    assert m, text[-2000:]
    return float(m.group(1))


def test_a_real_server_takes_short_turns_and_the_variable_changes_them(tmp_path: Path) -> None:
    home, docs, _ = make_kb(tmp_path)
    with serving(home, [docs]) as srv:
        assert _gauge(srv.get("/metrics").text) == pytest.approx(0.001)
    with serving(home, [docs], env={"CLAWKB_GIL_SWITCH_MS": "5"}) as srv:
        assert _gauge(srv.get("/metrics").text) == pytest.approx(0.005)


@pytest.mark.parametrize("raw", ["fast", "0", "-1", "nan", "inf", "5000"])
def test_a_bad_value_is_ignored_with_a_warning(
    raw: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CLAWKB_GIL_SWITCH_MS", raw)
    with caplog.at_level(logging.WARNING, logger="clawkb.server.switching"):
        assert switching.wanted_ms() == switching.INTERVAL_MS
    assert "CLAWKB_GIL_SWITCH_MS" in caplog.text and raw in caplog.text


def test_a_good_value_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWKB_GIL_SWITCH_MS", "2.5")
    assert switching.wanted_ms() == 2.5
    monkeypatch.delenv("CLAWKB_GIL_SWITCH_MS")
    assert switching.wanted_ms() == switching.INTERVAL_MS


def test_the_variable_is_not_an_unknown_setting(tmp_path: Path) -> None:
    from clawkb.config import Config

    cfg = Config.load(tmp_path, env={"CLAWKB_GIL_SWITCH_MS": "5"})  # the CLI would refuse it
    assert cfg.max_tokens == Config().max_tokens
