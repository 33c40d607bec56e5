"""A hostile parser plugin tries every way out of the sandbox it knows; each fails.

The parser is a real installed distribution (entry point ``clawkb.parsers``, as
tests/plugin_helpers.py installs plugins), run by a real ``clawkb index`` whose
environment holds a token and API keys and which has a file open for writing.
Each probe file asks the parser to try one thing; what it managed comes back as
the file's text (or the file fails, for the attempts the filter answers by
killing the worker).
"""

from __future__ import annotations

import json
import platform
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from clawkb.parsers import sandbox
from plugin_helpers import clawkb, install_dist

pytestmark = [
    pytest.mark.skipif(
        not sandbox.sandbox_status().seccomp, reason=sandbox.sandbox_status().detail
    ),
    pytest.mark.skipif(
        platform.machine() != "x86_64", reason="the probe uses x86-64 syscall numbers"
    ),
]

SECRET = "sekrit-4f1c9a"
PRINTED = "parser-printed-7d2e"

ESCAPER = r'''"""A parser that tries to escape its sandbox (test plugin)."""
import ctypes
import errno
import json
import os
import socket
import subprocess

from clawkb.types import ParsedDocument, Slice

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
SYS_PIDFD_OPEN, SYS_PIDFD_GETFD, SYS_KCMP = 434, 438, 312
SYS_PROCESS_VM_READV, SYS_PTRACE = 310, 101


def _sys(*args):
    ret = _libc.syscall(*[ctypes.c_long(a) for a in args])
    return "ok" if ret >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")


def _try(fn):
    try:
        return fn()
    except OSError as exc:
        return type(exc).__name__


def _grab_parent_fd(target):
    pidfd = _libc.syscall(ctypes.c_long(SYS_PIDFD_OPEN), ctypes.c_long(os.getppid()), ctypes.c_long(0))
    if pidfd < 0:
        return "pidfd_open " + errno.errorcode.get(ctypes.get_errno(), "?")
    fd = _libc.syscall(ctypes.c_long(SYS_PIDFD_GETFD), ctypes.c_long(pidfd), ctypes.c_long(target), ctypes.c_long(0))
    if fd < 0:
        return "pidfd_getfd " + errno.errorcode.get(ctypes.get_errno(), "?")
    os.write(fd, b"owned by the parser")
    return "wrote into the parent's file"


def _write_fd(fd):
    try:
        os.write(fd, b"PRINTED_MARK fd %d\n" % fd)
        return "wrote"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, "?")


def _fds():
    """This process's open descriptors and what each points at (the listing's own left out)."""
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass
    return out


def _read(path):
    with open(path, "rb") as fh:
        return "read" + (" the secret" if b"SECRET_MARK" in fh.read() else "")


class Escaper:
    name = "escaper"
    extensions = (".escape",)
    mime_types = ()
    isolate = True

    def parse(self, data, path):
        what = data.decode().strip()
        ppid = os.getppid()
        if what == "quiet":
            found = {
                "pidfd_getfd": _grab_parent_fd(int(os.environ.get("ESCAPE_FD", "-1") or -1)),
                "kill_parent": _try(lambda: os.kill(ppid, 0) or "signalled"),
                "tgkill_parent": _sys(234, ppid, ppid, 0),
                "kill_self": _try(lambda: os.kill(os.getpid(), 0) or "signalled"),
                "parent_environ": _try(lambda: _read(f"/proc/{ppid}/environ")),
                "parent_mem": _try(lambda: _read(f"/proc/{ppid}/mem")),
                "own_environ": "SECRET_MARK" in json.dumps(dict(os.environ)),
                "own_proc_environ": _try(lambda: _read("/proc/self/environ")),
                "ptrace_attach": _sys(SYS_PTRACE, 16, ppid, 0, 0),
                "process_vm_readv": _sys(SYS_PROCESS_VM_READV, ppid, 0, 0, 0, 0, 0),
                "kcmp": _sys(SYS_KCMP, os.getpid(), ppid, 0, 0, 0),
                "write_file": _try(lambda: open(path + ".dropped", "w").write("x") and "wrote"),
                "write_parent_fd": _write_fd(int(os.environ.get("ESCAPE_FD", "-1") or -1)),
                "write_stdout": _write_fd(1),
                "write_stderr": _write_fd(2),
                "fds": _fds(),
            }
            print("PRINTED_MARK print")
            text = json.dumps(found, sort_keys=True)
        elif what == "socket":
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            text = "opened a socket"
        elif what == "exec":
            text = subprocess.run(["/bin/echo", "ran"], capture_output=True).stdout.decode()
        else:
            text = "nothing asked"
        return ParsedDocument(slices=(Slice("probe " + text, 1, 1, ("p",)),), title="probe")


def factory():
    return Escaper()
'''.replace("SECRET_MARK", SECRET).replace("PRINTED_MARK", PRINTED)


def test_a_hostile_parser_cannot_leave_the_sandbox(tmp_path: Path) -> None:
    env = install_dist(
        tmp_path / "site",
        "escaper",
        "0.1",
        {"escaper_plugin": ESCAPER},
        "[clawkb.parsers]\nescaper = escaper_plugin:Escaper\n",
    )
    docs = tmp_path / "docs"
    docs.mkdir()
    for what in ("quiet", "socket", "exec"):
        (docs / f"{what}.escape").write_text(what)
    (docs / "fine.md").write_text("# Fine\n\nordinary escapefineword\n")
    # The indexing process holds a file open for writing and secrets in its environment.
    target = tmp_path / "parent-owned.log"
    env.update(
        GITHUB_TOKEN=SECRET,
        OPENAI_API_KEY=SECRET,
        CLAWKB_LLM_API_KEY=SECRET,
        MY_DB_PASSWORD=SECRET,
    )
    code = (
        "import os, sys\n"
        f"fd = os.open({str(target)!r}, os.O_WRONLY | os.O_CREAT, 0o600)\n"
        "os.set_inheritable(fd, False)\n"
        "os.environ['ESCAPE_FD'] = str(fd)\n"
        "from clawkb.cli.main import main\n"
        "sys.exit(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "--kb", str(tmp_path / "kb"), "init"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    done = subprocess.run(
        [sys.executable, "-c", code, "--kb", str(tmp_path / "kb"), "index", str(docs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout + done.stderr
    assert "escaper" in clawkb(env, "--kb", str(tmp_path / "kb"), "plugins").stdout
    # socket and exec: the worker is killed, only that file fails
    for what in ("socket", "exec"):
        line = next(ln for ln in out.splitlines() if f"{what}.escape" in ln)
        assert "stopped by the parser sandbox" in line, out
    with sqlite3.connect(tmp_path / "kb" / "clawkb.sqlite") as conn:
        texts = {
            Path(p).name: t
            for p, t in conn.execute(
                "SELECT d.path, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id"
            )
        }
    assert "escapefineword" in texts["fine.md"]  # the run went on
    found = json.loads(texts["quiet.escape"].split("probe ", 1)[1])
    assert found.pop("pidfd_getfd") == "pidfd_open EPERM", found
    assert target.read_bytes() == b""  # nothing reached the parent's open file
    assert found.pop("kill_self") == "signalled"  # its own process: allowed
    assert found.pop("own_environ") is False  # secrets scrubbed from its environment
    assert found.pop("own_proc_environ") in ("read", "PermissionError")
    assert found.pop("write_file") == "PermissionError"
    assert not (docs / "quiet.escape.dropped").exists()
    # descriptors: the parent's open file is gone (not merely read-only), stdout and
    # stderr are /dev/null, so what the parser prints reaches neither the terminal
    # nor the log of the process that indexes
    assert found.pop("write_parent_fd") == "EBADF", found
    assert found.pop("write_stdout") == "wrote"
    assert found.pop("write_stderr") == "wrote"
    assert PRINTED not in out, out
    fds = {int(fd): where for fd, where in found.pop("fds").items()}
    assert {fds.pop(fd) for fd in (0, 1, 2)} == {"/dev/null"}, fds
    pipes = [fd for fd, where in fds.items() if where.startswith("pipe:")]
    assert len(pipes) == 1, fds  # the result channel, nothing else of the parent's
    del fds[pipes[0]]
    assert all(where.startswith("/proc/") for where in fds.values()), fds  # the listing's own
    # the parent: no signals, no /proc files, no tracing, no memory reads
    assert found == {
        "kill_parent": "PermissionError",
        "tgkill_parent": "EPERM",
        "parent_environ": "PermissionError",
        "parent_mem": "PermissionError",
        "ptrace_attach": "EPERM",
        "process_vm_readv": "EPERM",
        "kcmp": "EPERM",
    }, found
