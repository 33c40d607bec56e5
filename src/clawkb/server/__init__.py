"""clawkb over HTTP (``clawkb serve``): JSON API, web page, watch, metrics, MCP.

Needs the ``server`` extra. :func:`run` serves until Ctrl-C; tests build the
same app with :func:`clawkb.server.app.create_app`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from clawkb.errors import MissingDependencyError

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp

    from clawkb.server.settings import ServerSettings

__all__ = ["bind", "run", "uvicorn_config"]


def run(
    settings: ServerSettings, *, watch: bool = False, announce: Callable[[str], None] = print
) -> None:
    """Serve ``settings.home`` on ``settings.host:settings.port`` with uvicorn."""
    try:
        import uvicorn

        from clawkb.server.app import create_app
    except ImportError as exc:
        raise MissingDependencyError("the HTTP server", "server") from exc
    factory = None
    if watch:
        from clawkb.watch import server_watcher

        factory = server_watcher
    spread = settings.workers > 1 and spreads_connections()
    # `--workers` on Linux: this socket only holds the port; each worker listens on one
    # of its own (below), and the kernel spreads new connections over them
    sock = bind(settings.host, settings.port, reuse_port=spread, listen=not spread)
    settings.port = sock.getsockname()[1]
    if settings.workers > 1:
        import shutil
        import tempfile

        from clawkb.server import metrics
        from clawkb.server.workers import serve_workers

        folder = tempfile.mkdtemp(prefix="clawkb-serve-")  # private (0700)
        metrics.share_through(os.path.join(folder, "metrics"))
        os.mkdir(os.path.join(folder, "metrics"))
        settings.shared_writer = (os.path.join(folder, "writer.sock"), os.urandom(32))

        parent = os.getpid()

        def run_worker(index: int) -> None:
            settings.worker = index
            balance.joined(index)
            app = create_app(
                settings,
                watch=factory if index == 0 else None,  # one watcher for all workers
                on_ready=(lambda: announce(_served(settings))) if index == 0 else None,
            )
            listening = sock
            if spread:  # listen once the app is built: no connection waits on a worker's start
                listening = bind(settings.host, settings.port, reuse_port=True)
                sock.close()  # this worker's copy of the parent's port holder
            config = uvicorn_config(app, settings, lifespan="on")
            uvicorn.Server(config).run(sockets=[listening])

        def start_writer() -> int:
            return _start_shared_writer(settings)

        from clawkb.server import balance, collector

        if spread:  # one listening socket per worker: connections are hashed over them
            balance.share_over(settings.workers)
        collector.before_fork()
        try:
            code = serve_workers(
                settings, sock, run_worker, announce=announce, on_exit=metrics.worker_ended,
                helper=start_writer,
            )  # fmt: skip
        finally:
            if os.getpid() == parent:
                shutil.rmtree(folder, ignore_errors=True)
        raise SystemExit(code)
    app = create_app(
        settings,
        watch=factory,
        on_ready=lambda: announce(_served(settings)),
    )
    config = uvicorn_config(app, settings, lifespan="on")
    server = uvicorn.Server(config)
    server.run(sockets=[sock])


def _start_shared_writer(settings: ServerSettings) -> int:
    """The workers' one writer process (:func:`clawkb.server.writer_process.serve_shared`):
    a fresh interpreter holding none of the parent's descriptors, its key on stdin."""
    import subprocess
    import sys

    assert settings.shared_writer is not None
    address, key = settings.shared_writer
    with contextlib.suppress(FileNotFoundError):
        os.unlink(address)  # the socket of the writer this one replaces
    cmd = [sys.executable, "-m", "clawkb.server.writer_process", address, str(settings.home)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, text=True)
    assert proc.stdin is not None
    proc.stdin.write(key.hex() + "\n")
    proc.stdin.close()
    return proc.pid


def _served(settings: ServerSettings) -> str:
    line = f"Serving on {settings.url}  (knowledge base: {settings.home})"
    for spec in settings.kbs:  # more KBs: each at /api/v1/kb/NAME/
        line += f"\n  also {spec.name}: {spec.home}  ({settings.url}/api/v1/kb/{spec.name}/)"
    return line


def uvicorn_config(
    app: ASGIApp, settings: ServerSettings, *, lifespan: Literal["auto", "on", "off"] = "auto"
) -> uvicorn.Config:
    """uvicorn's settings for ``app``: quiet, no Server header, the header deadline."""
    import uvicorn

    from clawkb.server.protocol import protocol_class

    return uvicorn.Config(
        app, host=settings.host, port=settings.port, log_level="warning", access_log=False,
        server_header=False, http=protocol_class(settings.header_timeout_s),
        timeout_keep_alive=5, lifespan=lifespan,
    )  # fmt: skip


def spreads_connections() -> bool:
    """Whether the kernel can spread connections over sockets that share a port
    (``SO_REUSEPORT`` balances on Linux; elsewhere the last socket bound takes all)."""
    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def bind(host: str, port: int, *, reuse_port: bool = False, listen: bool = True) -> socket.socket:
    """Bind first, so the URL printed is one that is listening (port 0 = any free port).

    ``reuse_port``: other sockets of this user may bind the same port, and the kernel
    hands each new connection to one of those listening (``serve --workers``: every
    worker listens on its own, so keep-alive clients do not all end up on the worker
    that happened to accept first). ``listen=False``: only hold the port."""
    from clawkb.errors import ConfigError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP: asyncio then sets TCP_NODELAY on accepted connections
    # (with proto 0 it does not, and small responses wait ~40 ms for delayed ACKs).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    if listen:
        sock.listen(2048)
    sock.set_inheritable(True)
    return sock
