"""The parser sandbox: what a forked parser worker may do (DESIGN D9, issue "parser sandbox").

Parsers of untrusted formats (PDF, DOCX, XLSX, HTML: C libraries reading
attacker-made bytes) run in a forked worker (:mod:`clawkb.ingest.limits`).
Before the parse starts, :func:`enter` confines that worker:

1. every inherited file descriptor except stdin/stdout/stderr and the result
   channel is pointed at ``/dev/null`` (read-only), so the parser cannot
   write to the SQLite store or index files the parent holds open;
2. ``PR_SET_NO_NEW_PRIVS``: nothing it starts can gain privileges;
3. resource limits: address space (the worker's size at fork plus
   :data:`MEMORY_HEADROOM_MB`), CPU seconds (the parse time limit + 1),
   open files (:data:`EXTRA_FILES` more than it inherited), file size
   (:data:`MAX_FILE_BYTES`) and no core dumps;
4. where libseccomp is available (PyPI ``pyseccomp``, over Debian's
   ``libseccomp2``), a seccomp filter: creating any socket, ``execve`` /
   ``execveat`` and starting a process (``fork``, ``vfork``, ``clone``
   without ``CLONE_THREAD``; threads are allowed) kill the worker (the file
   fails with "stopped by the parser sandbox"); opening a file for writing,
   creating, renaming, deleting or linking files and changing modes fail
   with ``EACCES``; ``io_uring`` (which would bypass the filter), ``clone3``,
   ``ptrace``, mounts and namespaces are refused.
   Seccomp cannot compare path strings, so instead of "no writes outside a
   temp folder" the worker may not open files for writing at all; results
   travel back over the pipe that was open before the filter.

A parser that really needs a program (Tesseract for scanned PDF pages) asks
a *helper*: a function registered with :func:`helper`, run by a broker
process the worker forks before the filter is loaded. The broker gets only a
name, string arguments and bytes — never a command line — and runs with the
same limits except seccomp. Without libseccomp the limits still apply;
:func:`sandbox_status` says whether the filter is on (``clawkb doctor``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import json
import math
import os
import resource
import signal
import socket
import struct
import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

#: Address space a worker may add to what it had when forked.
MEMORY_HEADROOM_MB = 2048
#: Largest file a worker may write (it may open none for writing under seccomp).
MAX_FILE_BYTES = 64 << 20
#: New file descriptors a worker may open beyond the ones it inherited.
EXTRA_FILES = 64
#: Largest helper request or answer.
MAX_MESSAGE_BYTES = 256 << 20

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_WRITE_FLAGS = (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND)
#: Syscalls that change the file system: refused with EACCES.
_FS_CHANGES = [
    "creat",
    "truncate",
    "rename",
    "renameat",
    "renameat2",
    "unlink",
    "unlinkat",
    "mkdir",
    "mkdirat",
    "rmdir",
    "link",
    "linkat",
    "symlink",
    "symlinkat",
    "chmod",
    "fchmodat",
    "chown",
    "lchown",
    "fchownat",
    "mknod",
    "mknodat",
]
#: Syscalls no parser needs that widen what a compromised worker can reach.
_REFUSED = [
    "ptrace",
    "process_vm_writev",
    "process_vm_readv",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "setns",
    "unshare",
    "bpf",
    "keyctl",
    "add_key",
    "request_key",
    "perf_event_open",
    "userfaultfd",
]
_CLONE_THREAD = 0x00010000
_NOT_IMPLEMENTED = ["clone3", "io_uring_setup", "io_uring_enter", "io_uring_register", "openat2"]


@dataclass(frozen=True)
class SandboxStatus:
    """What confines parser workers here; ``seccomp`` is whether the filter is on."""

    seccomp: bool
    detail: str
    no_new_privs: bool = True
    limits: dict[str, Any] = field(
        default_factory=lambda: {
            "address_space": f"size at fork + {MEMORY_HEADROOM_MB} MB",
            "cpu_seconds": "parse_timeout_s + 1",
            "open_files": f"inherited + {EXTRA_FILES}",
            "file_size_bytes": MAX_FILE_BYTES,
        }
    )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@functools.cache
def sandbox_status() -> SandboxStatus:
    """Whether the seccomp filter is on: pyseccomp imports, the filter compiles, and a
    throw-away child can load it (containers may forbid seccomp). Cached per process."""
    if not hasattr(os, "fork") or not os.path.isdir("/proc/self/fd"):
        return SandboxStatus(False, "not Linux: resource limits only", no_new_privs=False)
    try:
        import pyseccomp
    except ImportError:
        return SandboxStatus(
            False, "pyseccomp is not installed (pip install pyseccomp): limits only"
        )
    except (OSError, RuntimeError) as exc:  # the libseccomp shared library is missing
        return SandboxStatus(False, f"libseccomp unavailable ({exc}): limits only")
    try:
        _compiled_filter()
    except Exception as exc:
        return SandboxStatus(False, f"cannot build the seccomp filter ({exc}): limits only")
    problem = _probe()
    if problem is not None:
        return SandboxStatus(False, f"cannot load a seccomp filter here ({problem}): limits only")
    return SandboxStatus(
        True, f"seccomp filter via pyseccomp (libseccomp API {pyseccomp.get_api()})"
    )


def _probe() -> str | None:
    """Load the filter in a child that then exits; ``None`` when that worked."""
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the probe
        try:
            os.close(read_end)
            _no_new_privs()
            _load_filter()
            os.write(write_end, b"ok")
        except BaseException as exc:
            with contextlib.suppress(BaseException):
                os.write(write_end, str(exc).encode()[:300])
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        said = fh.read()
    os.waitpid(pid, 0)
    return None if said == b"ok" else (said.decode("utf-8", "replace") or "the probe died")


def stopped_reason(signum: int) -> str | None:
    """The message for a worker killed by the filter (SIGSYS), else ``None``."""
    if signum == getattr(signal, "SIGSYS", -1):
        return (
            "stopped by the parser sandbox: it tried to open a network connection"
            " or start a program (SIGSYS)"
        )
    return None


# -- entering the sandbox (in the forked worker) ------------------------------------


def enter(keep_fds: Iterable[int], timeout_s: float, *, seccomp: bool = True) -> None:
    """Confine this (forked) process; raises ``OSError`` if a step fails."""
    keep = {0, 1, 2, *keep_fds}
    highest = _neutralise_fds(keep)
    _no_new_privs()
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_FSIZE, MAX_FILE_BYTES)
    _limit(resource.RLIMIT_NOFILE, highest + 1 + EXTRA_FILES)
    if timeout_s > 0:
        cpu = math.ceil(timeout_s) + 1
        _limit(resource.RLIMIT_CPU, cpu, cpu + 1)
    _limit(resource.RLIMIT_AS, _address_space() + (MEMORY_HEADROOM_MB << 20))
    if seccomp and sandbox_status().seccomp:
        _load_filter()


def _neutralise_fds(keep: set[int]) -> int:
    """Point every inherited descriptor not in ``keep`` at /dev/null; the highest fd."""
    fds = [int(name) for name in os.listdir("/proc/self/fd")]
    null = os.open(os.devnull, os.O_RDONLY)
    for fd in fds:
        if fd not in keep and fd != null:
            with contextlib.suppress(OSError):  # the listing's own fd is gone by now
                os.dup2(null, fd, inheritable=False)
    os.close(null)
    return max([*fds, *keep])


def _no_new_privs() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


def _limit(which: int, soft: int, hard: int | None = None) -> None:
    _, current_hard = resource.getrlimit(which)
    hard = soft if hard is None else hard
    if current_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, current_hard), min(hard, current_hard)
    resource.setrlimit(which, (soft, hard))


def _address_space() -> int:
    with open("/proc/self/statm", "rb") as fh:
        pages = int(fh.read().split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


def prepare() -> SandboxStatus:
    """In the parent, before forking: check libseccomp and compile the filter once
    (building it takes ~15 ms of library calls; loading compiled BPF, microseconds)."""
    return sandbox_status()


@functools.cache
def _compiled_filter() -> bytes:
    """The filter as classic BPF (``struct sock_filter`` array), built by libseccomp."""
    import tempfile

    filt = _build_filter()
    with tempfile.TemporaryFile() as fh:
        filt.export_bpf(fh)
        fh.seek(0)
        return fh.read()


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _load_filter() -> None:
    """Install the compiled filter on this process (after ``PR_SET_NO_NEW_PRIVS``)."""
    bpf = _compiled_filter()
    program = ctypes.create_string_buffer(bpf, len(bpf))
    fprog = _SockFprog(len(bpf) // 8, ctypes.cast(program, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


def _build_filter() -> Any:
    import pyseccomp as sc

    filt = sc.SyscallFilter(sc.ALLOW)
    kill = sc.KILL_PROCESS
    for name in ("socket", "execve", "execveat", "fork", "vfork"):
        _add(filt, kill, name)
    # new processes, not threads: clone without CLONE_THREAD; clone3 passes its
    # flags in memory the filter cannot read, so it says ENOSYS and libc uses clone
    filt.add_rule(kill, "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
    refuse = sc.ERRNO(errno.EACCES)
    for flag in _WRITE_FLAGS:
        filt.add_rule(refuse, "open", sc.Arg(1, sc.MASKED_EQ, flag, flag))
        filt.add_rule(refuse, "openat", sc.Arg(2, sc.MASKED_EQ, flag, flag))
    for name in _FS_CHANGES:
        _add(filt, refuse, name)
    for name in _REFUSED:
        _add(filt, sc.ERRNO(errno.EPERM), name)
    for name in _NOT_IMPLEMENTED:
        _add(filt, sc.ERRNO(errno.ENOSYS), name)
    return filt


def _add(filt: Any, action: int, name: str) -> None:
    with contextlib.suppress(ValueError, OSError, RuntimeError):  # not on this architecture
        filt.add_rule(action, name)


# -- helpers: the few things a sandboxed parser may ask for -------------------------

Helper = Callable[[bytes, tuple[str, ...]], bytes]
_HELPERS: dict[str, Helper] = {}
#: In a sandboxed worker with a broker: the socket to it.
_broker: socket.socket | None = None


def helper(name: str) -> Callable[[Helper], Helper]:
    """Register ``fn(payload, args) -> bytes`` as helper ``name`` (module import time)."""

    def register(fn: Helper) -> Helper:
        _HELPERS[name] = fn
        return fn

    return register


def run_helper(name: str, payload: bytes, *args: str) -> bytes:
    """Run helper ``name``: through the broker inside a sandbox, else directly.

    Raises ``OSError`` with the helper's message when it fails.
    """
    if _broker is None:
        fn = _HELPERS.get(name)
        if fn is None:
            raise OSError(f"unknown helper {name!r}")
        return fn(payload, tuple(args))
    _send(_broker, {"name": name, "args": list(args)}, payload)
    answer = _receive(_broker)
    if answer is None:
        raise OSError(f"helper {name}: the broker went away")
    header, body = answer
    if not header.get("ok"):
        raise OSError(str(header.get("error", "helper failed")))
    return body


def start_broker(timeout_s: float) -> int | None:
    """In the worker, before :func:`enter`: fork the broker; returns the fd to keep."""
    global _broker
    if not _HELPERS:
        return None
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the broker
        code = 0
        try:
            ours.close()
            enter([theirs.fileno()], timeout_s, seccomp=False)
            _serve(theirs)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    theirs.close()
    _broker = ours
    return ours.fileno()


def _serve(sock: socket.socket) -> None:  # pragma: no cover - runs in the broker
    while (request := _receive(sock)) is not None:
        header, payload = request
        fn = _HELPERS.get(str(header.get("name")))
        args = header.get("args")
        if fn is None or not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            _send(sock, {"ok": False, "error": "unknown helper or bad arguments"}, b"")
            continue
        try:
            body = fn(payload, tuple(args))
        except Exception as exc:
            _send(sock, {"ok": False, "error": str(exc) or type(exc).__name__}, b"")
        else:
            _send(sock, {"ok": True}, body)


def _send(sock: socket.socket, header: dict[str, Any], payload: bytes) -> None:
    head = json.dumps(header).encode()
    sock.sendall(struct.pack("!II", len(head), len(payload)) + head + payload)


def _receive(sock: socket.socket) -> tuple[dict[str, Any], bytes] | None:
    sizes = _exactly(sock, 8)
    if sizes is None:
        return None
    head_len, body_len = struct.unpack("!II", sizes)
    if head_len > 65536 or body_len > MAX_MESSAGE_BYTES:
        return None
    head = _exactly(sock, head_len)
    body = _exactly(sock, body_len)
    if head is None or body is None:
        return None
    try:
        header = json.loads(head)
    except ValueError:
        return None
    return (header, body) if isinstance(header, dict) else None


def _exactly(sock: socket.socket, n: int) -> bytes | None:
    parts, left = [], n
    while left:
        part = sock.recv(min(left, 1 << 20))
        if not part:
            return None
        parts.append(part)
        left -= len(part)
    return b"".join(parts)
