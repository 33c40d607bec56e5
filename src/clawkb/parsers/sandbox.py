"""The parser sandbox: what a forked parser worker may do (ARCHITECTURE.md, `ingest/`, which runs the parsers).

Parsers of untrusted formats (PDF, DOCX, XLSX, HTML: C libraries reading
attacker-made bytes) run in a forked worker (:mod:`clawkb.parsers.limits`).
Before the parse starts, :func:`enter` confines that worker:

1. every inherited file descriptor except the result channel (and the helper
   broker's socket) is closed, and stdin, stdout and stderr are ``/dev/null``
   (read-only for stdin): the worker holds none of the parent's files (store,
   index, sockets, its terminal or log), and what a parser prints goes
   nowhere. The cyclic garbage collector is frozen first, so a stale object
   of the parent's (a file, a socket) is never finalised in the worker and
   cannot close a number that a file the parser opened has taken since;
2. secrets leave its environment: every variable whose name holds KEY, TOKEN,
   SECRET, PASSWORD, PASSWD, CREDENTIAL or AUTH, and ``CLAWKB_LLM_*``
   (``CLAWKB_TOKEN``, ``OPENAI_API_KEY``...), their bytes zeroed first;
3. ``PR_SET_DUMPABLE 0`` here and in the parent (:func:`harden_parent`, before
   the first fork), and as root every capability dropped: the worker cannot
   read ``/proc/PARENT/environ`` or ``/mem`` nor attach to the parent;
4. ``PR_SET_NO_NEW_PRIVS``: nothing it starts can gain privileges;
5. resource limits: address space (the worker's size at fork plus
   :data:`MEMORY_HEADROOM_MB`), CPU seconds (the parse time limit + 1),
   open files (:data:`EXTRA_FILES` more than it inherited), file size
   (:data:`MAX_FILE_BYTES`) and no core dumps;
6. where libseccomp is available (PyPI ``pyseccomp``, over Debian's
   ``libseccomp2``), an **allow-list** seccomp filter (:data:`_ALLOWED`):
   what the Python runtime and the format libraries need to read bytes and
   build a result (memory, threads, time, reading files, the result pipe and
   the broker socket). Everything else is refused with ``EPERM`` — among
   them ``pidfd_open``/``pidfd_getfd``, ``process_vm_readv``/``writev``,
   ``ptrace``, ``kcmp``, mounts, namespaces, ``bpf``, ``io_uring`` (which
   would bypass the filter). Creating a socket, ``execve``/``execveat`` and
   starting a process (``fork``, ``vfork``, ``clone`` without
   ``CLONE_THREAD``) kill the worker (the file fails with "stopped by the
   parser sandbox"). ``open``/``openat`` with any write flag fail with
   ``EACCES``; ``kill``/``tgkill``/``prlimit64`` reach only the worker itself
   (its pid is written into the compiled filter after fork); ``ioctl`` only
   asks "is this a terminal" and the like (no ``TIOCSTI``).
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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyseccomp import Arg, SyscallFilter

#: Address space a worker may add to what it had when forked.
MEMORY_HEADROOM_MB = 2048
#: Largest file a worker may write (it may open none for writing under seccomp).
MAX_FILE_BYTES = 64 << 20
#: New file descriptors a worker may open beyond the ones it inherited.
EXTRA_FILES = 64
#: Largest helper request or answer.
MAX_MESSAGE_BYTES = 256 << 20

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_DUMPABLE = 4
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
#: What a parse needs (the Python runtime, numpy, pdfium, lxml, openpyxl): memory,
#: threads, reading files, the result pipe and the broker socket. Anything else is
#: refused with EPERM; the few below that reach other processes or the outside
#: world kill the worker.
_ALLOWED = [
    # files already open, and read-only opens (``open``/``openat`` are checked below)
    "read", "readv", "pread64", "preadv", "preadv2", "write", "writev", "pwrite64",
    "pwritev", "pwritev2", "lseek", "close", "close_range", "fstat", "stat", "lstat",
    "newfstatat", "statx", "fstatfs", "statfs", "access", "faccessat", "faccessat2",
    "readlink", "readlinkat", "getdents", "getdents64", "getcwd", "chdir", "fchdir",
    "fcntl", "dup", "dup2", "dup3", "pipe", "pipe2", "poll", "ppoll", "select",
    "pselect6", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
    "eventfd2", "fadvise64", "fsync", "fdatasync", "umask",
    # memory
    "mmap", "munmap", "mprotect", "mremap", "madvise", "brk", "msync", "mincore",
    "get_mempolicy", "membarrier",
    # threads, signals and time (``clone`` is checked below)
    "futex", "futex_waitv", "set_robust_list", "get_robust_list", "rseq",
    "set_tid_address", "arch_prctl", "prctl", "rt_sigaction", "rt_sigprocmask",
    "rt_sigreturn", "rt_sigtimedwait", "sigaltstack", "restart_syscall", "sched_yield",
    "sched_getaffinity", "sched_getparam", "sched_getscheduler", "getpriority",
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday",
    "time", "getrandom", "exit", "exit_group", "wait4",
    # who am I
    "getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid",
    "getresuid", "getresgid", "getgroups", "getpgrp", "getsid", "uname", "sysinfo",
    "getrusage", "times", "getrlimit",
    # the broker socket and the result pipe, both opened before the filter
    "sendto", "recvfrom", "sendmsg", "recvmsg", "shutdown", "getsockopt", "getsockname",
]  # fmt: skip
#: Reaching outside: kill the worker (the file fails with "stopped by the parser sandbox").
_KILL = ["socket", "socketpair", "execve", "execveat", "fork", "vfork"]
#: Syscalls libc falls back from when they say ENOSYS (clone3 -> clone: the filter
#: cannot read clone3's flags, which are in memory).
_NOT_IMPLEMENTED = ["clone3", "io_uring_setup", "io_uring_enter", "io_uring_register", "openat2"]
_CLONE_THREAD = 0x00010000
#: ioctl requests a parse may make: "is this a terminal?", bytes waiting, blocking mode,
#: close-on-exec. Not TIOCSTI (typing into the user's terminal) nor anything else.
_IOCTLS = [0x5401, 0x541B, 0x5421, 0x5451, 0x5450]  # TCGETS FIONREAD FIONBIO FIOCLEX FIONCLEX
#: Stands for the worker's own pid in the compiled filter; replaced after fork
#: (pids never reach this value: pid_max is at most 2**22).
_SELF_PID = 0x7EADBEEF


@dataclass(frozen=True)
class SandboxStatus:
    """What confines parser workers here; ``seccomp`` is whether the filter is on."""

    seccomp: bool
    detail: str
    no_new_privs: bool = True
    limits: dict[str, str | int] = field(
        default_factory=lambda: {
            "address_space": f"size at fork + {MEMORY_HEADROOM_MB} MB",
            "cpu_seconds": "parse_timeout_s + 1",
            "open_files": f"inherited + {EXTRA_FILES}",
            "file_size_bytes": MAX_FILE_BYTES,
        }
    )

    def to_dict(self) -> dict[str, object]:
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
    highest = _close_fds(set(keep_fds))
    scrub_environment()
    _prctl(_PR_SET_DUMPABLE, 0, "PR_SET_DUMPABLE")
    _drop_capabilities()
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


#: Words that mark an environment variable as a secret (``CLAWKB_TOKEN``, API keys...).
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")


def is_secret(name: str) -> bool:
    upper = name.upper()
    return upper.startswith("CLAWKB_LLM_") or any(word in upper for word in SECRET_WORDS)


def scrub_environment() -> list[str]:
    """Remove secret variables from this process's environment; their names.

    The value bytes are zeroed where libc keeps them first (for the variables
    the process started with, that is the memory ``/proc/PID/environ`` shows).
    """
    names = [name for name in os.environ if is_secret(name)]
    if not names:
        return names
    with contextlib.suppress(OSError, ValueError, AttributeError):
        libc = ctypes.CDLL(None)
        environ = ctypes.POINTER(ctypes.c_void_p).in_dll(libc, "environ")
        wanted = {name.encode() for name in names}
        i = 0
        while environ[i]:
            addr = environ[i]
            entry = ctypes.string_at(addr)
            key, _, value = entry.partition(b"=")
            if key in wanted and value:
                ctypes.memset(addr + len(key) + 1, 0, len(value))
            i += 1
    for name in names:
        os.environ.pop(name, None)
    return names


def harden_parent() -> None:
    """In the parent, before forking workers: not dumpable, so a worker (same user)
    can neither read ``/proc/PARENT/environ`` or ``/mem`` nor attach to it."""
    with contextlib.suppress(OSError):
        _prctl(_PR_SET_DUMPABLE, 0, "PR_SET_DUMPABLE")


def _prctl(option: int, value: int, what: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({what}) failed")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _drop_capabilities() -> None:
    """Run as root: give up every capability (``CAP_SYS_PTRACE`` would reopen the
    parent's ``/proc`` files, ``CAP_DAC_OVERRIDE`` every file on the machine)."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset (dropping capabilities) failed")


def _close_fds(keep: set[int]) -> int:
    """Close every inherited descriptor but ``keep``; stdin, stdout and stderr become
    ``/dev/null``. Returns the highest descriptor still open."""
    import gc

    gc.freeze()  # the parent's objects are never collected here, so none closes "its" fd
    highest = max(int(name) for name in os.listdir("/proc/self/fd"))
    low = 3
    for fd in sorted(keep - {0, 1, 2}):  # close_range(2) over the gaps between kept ones
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, max(highest, low) + 1)
    for fd, flags in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        if fd in keep:  # the parent ran without it, and the result pipe took its number
            continue
        null = os.open(os.devnull, flags)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        os.set_inheritable(fd, True)  # a helper's program gets them as its own
    return max([2, *keep])


def _no_new_privs() -> None:
    _prctl(_PR_SET_NO_NEW_PRIVS, 1, "PR_SET_NO_NEW_PRIVS")


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
    harden_parent()
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
    bpf = _for_this_process(_compiled_filter())
    program = ctypes.create_string_buffer(bpf, len(bpf))
    fprog = _SockFprog(len(bpf) // 8, ctypes.cast(program, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K


def _for_this_process(bpf: bytes) -> bytes:
    """The filter with :data:`_SELF_PID` replaced by this process's pid (signals and
    limits may only target the worker itself)."""
    out = bytearray(bpf)
    replaced = 0
    for off in range(0, len(out) - 7, 8):
        code, _, _, k = struct.unpack_from("=HBBI", out, off)
        if code == _JEQ_K and k == _SELF_PID:
            struct.pack_into("=I", out, off + 4, os.getpid())
            replaced += 1
    if not replaced:
        raise OSError("the compiled seccomp filter has no own-pid check")
    return bytes(out)


def _build_filter() -> SyscallFilter:
    import pyseccomp as sc

    filt = sc.SyscallFilter(sc.ERRNO(errno.EPERM))
    for name in _ALLOWED:
        _add(filt, sc.ALLOW, name)
    for name in _KILL:
        _add(filt, sc.KILL_PROCESS, name)
    for name in _NOT_IMPLEMENTED:
        _add(filt, sc.ERRNO(errno.ENOSYS), name)
    # threads, not processes
    filt.add_rule(sc.ALLOW, "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, _CLONE_THREAD))
    filt.add_rule(sc.KILL_PROCESS, "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
    # opening files read-only; any write flag is refused (seccomp cannot read paths,
    # so there is no "write only under a temp folder")
    refuse = sc.ERRNO(errno.EACCES)
    _add(filt, sc.ALLOW, "open", sc.Arg(1, sc.MASKED_EQ, _WRITE_FLAGS, 0))
    _add(filt, sc.ALLOW, "openat", sc.Arg(2, sc.MASKED_EQ, _WRITE_FLAGS, 0))
    for flag in (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND):
        _add(filt, refuse, "open", sc.Arg(1, sc.MASKED_EQ, flag, flag))
        _add(filt, refuse, "openat", sc.Arg(2, sc.MASKED_EQ, flag, flag))
    for request in _IOCTLS:
        filt.add_rule(sc.ALLOW, "ioctl", sc.Arg(1, sc.EQ, request))
    # signals and limits: this process only (the pid is filled in after fork)
    for name in ("kill", "tkill"):
        _add(filt, sc.ALLOW, name, sc.Arg(0, sc.EQ, _SELF_PID))
    _add(filt, sc.ALLOW, "tgkill", sc.Arg(0, sc.EQ, _SELF_PID))
    for pid in (0, _SELF_PID):
        _add(filt, sc.ALLOW, "prlimit64", sc.Arg(0, sc.EQ, pid))
    _add(filt, sc.ALLOW, "setrlimit")
    return filt


def _add(filt: SyscallFilter, action: int, name: str, *args: Arg) -> None:
    with contextlib.suppress(ValueError, OSError, RuntimeError):  # not on this architecture
        filt.add_rule(action, name, *args)


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


def _send(sock: socket.socket, header: dict[str, object], payload: bytes) -> None:
    head = json.dumps(header).encode()
    sock.sendall(struct.pack("!II", len(head), len(payload)) + head + payload)


def _receive(sock: socket.socket) -> tuple[dict[str, object], bytes] | None:
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
