"""The per-file parse time limit: forked workers, the alarm, and the pipeline using them."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import subprocess
import time
from pathlib import Path
from typing import ClassVar

import pytest

from clawkb import KnowledgeBase
from clawkb.errors import ParseError
from clawkb.ingest.pipeline import Ingestor
from clawkb.parsers.limits import parse_with_limit, time_left
from clawkb.parsers.registry import ParserRegistry
from clawkb.parsers.text import TextParser
from clawkb.types import ParsedDocument, Slice


class _Base:
    extensions: ClassVar[tuple[str, ...]] = (".slow",)
    mime_types: ClassVar[tuple[str, ...]] = ()
    isolate: ClassVar[bool] = True


class Echo(_Base):
    """Returns the bytes as one slice, from the worker."""

    name: ClassVar[str] = "echo"

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        return ParsedDocument(
            slices=(Slice(data.decode(), 1, 1, ("h",), page=3),),
            title=str(os.getpid()),
            metadata={"time_left": time_left()},
        )


class Sleeper(_Base):
    """Starts a helper process and blocks on it: both must die on time-out."""

    name: ClassVar[str] = "sleeper"
    pid_file: ClassVar[Path]
    sandbox: ClassVar[bool] = False  # it must start a program and write its pid

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        helper = subprocess.Popen(["sleep", "60"])
        self.pid_file.write_text(str(helper.pid))
        helper.wait()
        raise AssertionError("not reached")


class Segfault(_Base):
    name: ClassVar[str] = "segfault"

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        ctypes.string_at(0)  # a crash in C code
        raise AssertionError("not reached")


class Refuser(_Base):
    name: ClassVar[str] = "refuser"

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        raise ParseError(path, "unsupported variant 7")


class Spinner(_Base):
    """Pure-Python endless loop, run in-process under the alarm."""

    name: ClassVar[str] = "spinner"
    isolate: ClassVar[bool] = False

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        while True:
            # a parser swallowing errors must not swallow the deadline
            with contextlib.suppress(Exception):
                time.sleep(0.01)


def test_isolated_parse_returns_the_workers_result() -> None:
    doc = parse_with_limit(Echo(), b"hello", "a.slow", 10)
    assert doc.slices[0] == Slice("hello", 1, 1, ("h",), page=3)
    assert doc.title != str(os.getpid())  # it really ran in another process
    assert 0 < doc.metadata["time_left"] <= 10  # the worker knows its deadline
    assert time_left() is None  # and the parent has none


def test_isolated_time_out_kills_the_worker_and_its_helpers(tmp_path: Path) -> None:
    Sleeper.pid_file = tmp_path / "helper.pid"
    t0 = time.monotonic()
    with pytest.raises(ParseError) as info:
        parse_with_limit(Sleeper(), b"", "big.slow", 1.0)
    assert time.monotonic() - t0 < 10
    assert info.value.path == "big.slow"
    assert info.value.reason.startswith("parse time limit exceeded (1 s")
    helper = int(Sleeper.pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(helper):
        time.sleep(0.05)
    assert not _alive(helper)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def test_worker_crash_fails_only_that_file() -> None:
    with pytest.raises(ParseError) as info:
        parse_with_limit(Segfault(), b"", "bad.slow", 10)
    assert info.value.reason == "parser segfault crashed (worker killed by signal SIGSEGV)"


def test_parse_error_in_the_worker_keeps_its_reason() -> None:
    with pytest.raises(ParseError) as info:
        parse_with_limit(Refuser(), b"", "x.slow", 10)
    assert (info.value.path, info.value.reason) == ("x.slow", "unsupported variant 7")


def test_in_process_alarm_stops_a_python_loop() -> None:
    t0 = time.monotonic()
    with pytest.raises(ParseError, match="parse time limit exceeded"):
        parse_with_limit(Spinner(), b"", "spin.slow", 0.3)
    assert time.monotonic() - t0 < 5
    # the alarm is disarmed and the old handler is back
    import signal

    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0
    assert signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None)


def test_no_limit_when_timeout_is_zero() -> None:
    doc = parse_with_limit(TextParser(), b"plain text", "a.txt", 0)
    assert doc.slices[0].text == "plain text"


def test_pipeline_applies_the_limit_and_goes_on(tmp_path: Path) -> None:
    Sleeper.pid_file = tmp_path / "helper.pid"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "stuck.slow").write_text("x")
    (docs / "fine.txt").write_text("the watchdog resets the board")
    registry = ParserRegistry(eps=[])
    registry.register(TextParser(), "test")
    registry.register(Sleeper(), "test")
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb, kb.writer():
        config = dataclasses.replace(kb.config, parse_timeout_s=1.0)
        report = Ingestor(kb.repo, kb.lexical, config, registry).index_paths([docs])
    assert report.added == 1 and report.failed == 1
    ((path, reason),) = report.errors
    assert path.endswith("stuck.slow") and "parse time limit exceeded" in reason
