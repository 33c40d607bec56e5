"""The parser sandbox: a parser that turns hostile is stopped, and only its file fails.

The parsers below are plugins registered through the real registry (entry
points loaded, then ``register``), run by the real ingest pipeline on a real
KB, in the real forked worker with the real seccomp filter.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from clawkb import KnowledgeBase
from clawkb.errors import ParseError
from clawkb.ingest.pipeline import IndexReport, Ingestor
from clawkb.parsers import sandbox
from clawkb.parsers.limits import parse_with_limit
from clawkb.parsers.registry import ParserRegistry
from clawkb.types import ParsedDocument, Slice

SECCOMP = sandbox.sandbox_status().seccomp
needs_seccomp = pytest.mark.skipif(not SECCOMP, reason=sandbox.sandbox_status().detail)


def _doc(text: str) -> ParsedDocument:
    return ParsedDocument(slices=(Slice(text, 1, 1, ("h",)),), title="t")


class _Plugin:
    mime_types: ClassVar[tuple[str, ...]] = ()
    isolate: ClassVar[bool] = True


class Phoner(_Plugin):
    """Tries to send the file it parses to a server."""

    name: ClassVar[str] = "phoner"
    extensions: ClassVar[tuple[str, ...]] = (".phone",)

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        with socket.create_connection(("127.0.0.1", 9), timeout=1) as s:
            s.sendall(data)
        return _doc("sent")


class Spawner(_Plugin):
    """Tries to start a shell."""

    name: ClassVar[str] = "spawner"
    extensions: ClassVar[tuple[str, ...]] = (".spawn",)

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        out = subprocess.run(["/bin/sh", "-c", "echo owned"], capture_output=True, check=False)
        return _doc(out.stdout.decode())


class Writer(_Plugin):
    """Tries to drop a file next to the one it parses."""

    name: ClassVar[str] = "writer"
    extensions: ClassVar[tuple[str, ...]] = (".write",)

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        Path(path + ".dropped").write_text("payload")
        return _doc("wrote")


class FdProber(_Plugin):
    """Reports which inherited descriptors it could write to (the store, the index...)."""

    name: ClassVar[str] = "fdprober"
    extensions: ClassVar[tuple[str, ...]] = (".probe",)

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        writable = []
        for fd in sorted(int(n) for n in os.listdir("/proc/self/fd")):
            if fd > 2:
                try:
                    os.write(fd, b"")
                    if os.readlink(f"/proc/self/fd/{fd}") != "/dev/null":
                        writable.append(os.readlink(f"/proc/self/fd/{fd}"))
                except OSError:
                    pass
        return _doc(json.dumps(writable))


class Glutton(_Plugin):
    """Asks for far more memory than a parse may use."""

    name: ClassVar[str] = "glutton"
    extensions: ClassVar[tuple[str, ...]] = (".eat",)

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        block = bytearray((sandbox.MEMORY_HEADROOM_MB + 1024) << 20)
        return _doc(str(len(block)))


@sandbox.helper("shout")
def _shout(payload: bytes, args: tuple[str, ...]) -> bytes:
    """A helper that starts a program: allowed in the broker, not in the worker."""
    done = subprocess.run(["tr", "a-z", "A-Z"], input=payload, capture_output=True, check=True)
    return done.stdout + "".join(args).encode()


class Shouter(_Plugin):
    name: ClassVar[str] = "shouter"
    extensions: ClassVar[tuple[str, ...]] = (".shout",)
    helpers: ClassVar[tuple[str, ...]] = ("shout",)

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        return _doc(sandbox.run_helper("shout", data, "!").decode())


def _index(tmp_path: Path, files: dict[str, bytes]) -> tuple[IndexReport, dict[str, str]]:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, data in files.items():
        (docs / name).write_bytes(data)
    (docs / "fine.md").write_text("# Fine\n\nordinary sandboxfineword\n")
    registry = ParserRegistry()  # the installed entry points: the built-ins
    for plugin in (Phoner(), Spawner(), Writer(), FdProber(), Glutton(), Shouter()):
        registry.register(plugin, "test plugin")
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb, kb.writer():
        report = Ingestor(kb.repo, kb.lexical, kb.config, registry).index_paths([docs])
        assert kb.search("sandboxfineword").hits  # the run went on
        texts = {
            Path(r[0]).name: r[1]
            for r in kb.conn.execute(
                "SELECT d.path, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id"
            )
        }
    return report, texts


@needs_seccomp
def test_a_parser_that_opens_a_socket_or_starts_a_program_is_stopped(tmp_path: Path) -> None:
    report, _ = _index(tmp_path, {"a.phone": b"secret", "b.spawn": b"x"})
    reasons = {Path(p).name: r for p, r in report.errors}
    assert report.failed == 2 and report.added == 1, reasons
    for name, parser in (("a.phone", "phoner"), ("b.spawn", "spawner")):
        assert reasons[name] == (
            f"parser {parser} stopped by the parser sandbox: it tried to open a network"
            " connection or start a program (SIGSYS)"
        )


@needs_seccomp
def test_a_parser_cannot_write_files(tmp_path: Path) -> None:
    report, _ = _index(tmp_path, {"c.write": b"x"})
    ((path, reason),) = report.errors
    assert path.endswith("c.write") and "PermissionError" in reason
    assert not Path(path + ".dropped").exists()


def test_inherited_descriptors_are_not_writable(tmp_path: Path) -> None:
    _, texts = _index(tmp_path, {"d.probe": b"x"})
    writable = json.loads(texts["d.probe"].split("\n")[-1])
    # only the pipe that carries the result back; never the store or index files
    assert all(target.startswith("pipe:") for target in writable), writable
    assert len(writable) <= 1


def test_memory_is_limited(tmp_path: Path) -> None:
    report, _ = _index(tmp_path, {"e.eat": b"x"})
    ((path, reason),) = report.errors
    assert path.endswith("e.eat") and "MemoryError" in reason


def test_helpers_run_programs_for_a_sandboxed_parser(tmp_path: Path) -> None:
    report, texts = _index(tmp_path, {"f.shout": b"quiet words"})
    assert not report.errors, report.errors
    assert texts["f.shout"].endswith("QUIET WORDS!")


def test_a_helper_refuses_what_it_does_not_know() -> None:
    class Prober(Shouter):
        def parse(self, data: bytes, path: str) -> ParsedDocument:
            return _doc(sandbox.run_helper("no-such-helper", b"").decode())

    with pytest.raises(ParseError, match="unknown helper"):
        parse_with_limit(Prober(), b"", "x.shout", 10)


def test_isolated_parsers_stay_isolated_without_a_time_limit(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="MemoryError"):
        parse_with_limit(Glutton(), b"", "g.eat", 0)


def test_untrusted_formats_are_isolated() -> None:
    registry = ParserRegistry()
    for name in ("pdf", "docx", "xlsx", "html"):
        parser = registry.by_name(name)
        assert parser is not None and parser.isolate is True, name  # type: ignore[attr-defined]


def test_status_without_libseccomp_keeps_the_limits(tmp_path: Path) -> None:
    """A real subprocess where pyseccomp cannot be imported: the filter is off, says so,
    and the limits still stop a memory hog."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['pyseccomp'] = None\n")
    code = (
        "import json, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from clawkb.parsers import sandbox\n"
        "from clawkb.parsers.limits import parse_with_limit\n"
        "from clawkb.errors import ParseError\n"
        "from test_sandbox import Glutton, Spawner\n"
        "status = sandbox.sandbox_status()\n"
        "try:\n"
        "    parse_with_limit(Glutton(), b'', 'g.eat', 20)\n"
        "    hog = 'parsed'\n"
        "except ParseError as exc:\n"
        "    hog = exc.reason\n"
        "spawned = parse_with_limit(Spawner(), b'', 's.spawn', 20).slices[0].text\n"
        "print(json.dumps([status.seccomp, status.detail, hog, spawned]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run(
        [sys.executable, "-c", code, str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=True,
    )
    seccomp, detail, hog, spawned = json.loads(out.stdout)
    assert seccomp is False and "pyseccomp is not installed" in detail
    assert "MemoryError" in hog
    assert spawned == "owned\n"  # without the filter, exec is possible: the status says so


def test_doctor_reports_the_sandbox_filter(tmp_path: Path) -> None:
    """`clawkb doctor` names the seccomp filter's state; without pyseccomp it says off."""
    home = tmp_path / "kb"
    subprocess.run(
        [sys.executable, "-m", "clawkb.cli.main", "--kb", str(home), "init"],
        capture_output=True,
        check=True,
    )
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['pyseccomp'] = None\n")
    runs = {}
    for label, env in (
        ("with", dict(os.environ)),
        ("without", {**os.environ, "PYTHONPATH": str(site)}),
    ):
        out = subprocess.run(
            [sys.executable, "-m", "clawkb.cli.main", "--kb", str(home), "doctor"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=False,
        )
        runs[label] = out.stdout
    assert "parser sandbox: seccomp filter off: pyseccomp is not installed" in runs["without"]
    expected = "on" if SECCOMP else "off"
    assert f"parser sandbox: seccomp filter {expected}" in runs["with"]
