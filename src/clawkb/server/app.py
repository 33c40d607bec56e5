"""The ASGI application: API routers, the web page, ``/metrics``, ``/mcp``, health probes.

:func:`create_app` builds it from :class:`ServerSettings`; ``clawkb serve``
runs it under uvicorn, tests run the same app on a loopback port.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from clawkb import __version__
from clawkb.errors import ClawkbError
from clawkb.server import api_read, api_write, ask, chat, workbench
from clawkb.server.ask import RateLimited
from clawkb.server.chat import Conversations
from clawkb.server.errors import error_for, validation_message
from clawkb.server.kbs import KBSpec
from clawkb.server.metrics import Metrics
from clawkb.server.runtime import Runtime
from clawkb.server.security import BodyTimeout, BodyTooLarge, Guard, RateLimiter
from clawkb.server.settings import ServerSettings
from clawkb.server.shared import FILE_NAME, SharedConversations, SharedFile, SharedRateLimiter

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase
    from clawkb.watch import Watcher

STATIC = Path(str(resources.files("clawkb.server") / "static"))
_HTTP_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
               405: "method_not_allowed", 408: "timeout", 413: "too_large", 429: "rate_limited"}  # fmt: skip


class ServerState:
    """What every request handler can reach: settings, roots, runtime, metrics, watcher."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.runtime = Runtime(
            settings.home,
            shared_writer=settings.shared_writer,
            follow_config=settings.worker is not None,
        )
        self.runtime.warm()
        self.roots = list(settings.roots) or self._known_roots()
        self.metrics = Metrics(status=lambda: self.runtime.read_sync(lambda kb: kb.status()))
        self.ask_limiter: RateLimiter | SharedRateLimiter
        self.conversations: Conversations | SharedConversations
        if settings.worker is None:  # a lone process: in memory
            self.ask_limiter = RateLimiter(settings.ask_per_minute)
            self.conversations = Conversations()
        else:  # one of `serve --workers N`: in a file they all see
            shared = SharedFile(settings.home / FILE_NAME)
            self.ask_limiter = SharedRateLimiter(shared, settings.name, settings.ask_per_minute)
            self.conversations = SharedConversations(
                shared, settings.name, keep=chat.MAX_CONVERSATIONS, turns=chat.MAX_TURNS
            )
        self.watcher: Watcher | None = None
        self.started = time.time()
        self._types: set[str] | None = None

    def _known_roots(self) -> list[Path]:
        """Without PATH arguments: the roots of past runs and the datasheet folders."""
        from clawkb.hardware.boards import all_roots

        def run(kb: KnowledgeBase) -> list[str]:
            seen = [r for run in kb.runs(50) for r in run["roots"]]
            return seen + all_roots(kb.conn, kb.config, kb.home)

        out: list[Path] = []
        for r in self.runtime.read_sync(run):
            p = Path(r).resolve()
            p = p if p.is_dir() or not p.exists() else p.parent
            if p not in out:
                out.append(p)
        return out

    def upload_types(self) -> set[str]:
        if self.settings.upload_types:
            return set(self.settings.upload_types)
        if self._types is None:
            self._types = set(self.runtime.read_sync(lambda kb: kb.registry.extensions()))
        return self._types

    def describe(self) -> dict[str, Any]:
        s = self.settings
        return {
            "version": __version__,
            "url": s.url,
            "kb": s.name,
            "home": s.home.as_posix(),
            "roots": [r.as_posix() for r in self.roots],
            "inbox": s.inbox.as_posix() if s.inbox else None,
            "auth": bool(s.token),
            "mcp": s.mcp,
            "workers": s.workers,
            "worker": s.worker,
            "uptime_s": round(time.time() - self.started, 1),
            "writer": {
                "queued": self.runtime.queued,
                "current": self.runtime.current_job,
                **self.runtime.writer_state(),
            },
            "watch": self.watcher.state() if self.watcher else None,
        }


def create_app(
    settings: ServerSettings,
    *,
    watch: Callable[[ServerState], Watcher] | None = None,
    on_ready: Callable[[], None] | None = None,
) -> FastAPI:
    """The application; ``watch`` is a started-on-lifespan :class:`clawkb.watch.Watcher` factory;
    ``on_ready()`` runs once everything (MCP, watch) has started."""
    settings.check()
    state = ServerState(settings)
    states = {settings.name: state}
    for spec in settings.kbs:
        states[spec.name] = ServerState(_kb_settings(settings, spec))
    mcp_app, mcp_lifespan = _mcp(settings, state.runtime) if settings.mcp else (None, None)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if mcp_lifespan is not None:
                await stack.enter_async_context(mcp_lifespan())
            if watch is not None:
                state.watcher = watch(state)
                state.watcher.start()
                stack.callback(state.watcher.stop)
            for each in states.values():
                stack.callback(each.runtime.close)
            if on_ready is not None:
                on_ready()
            yield

    app = FastAPI(
        title="clawkb",
        version=__version__,
        openapi_url="/api/v1/openapi.json",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.clawkb = state
    app.state.kbs = states
    routers = (api_read.router, api_write.router, api_write.compat, ask.router, chat.router,
               workbench.router)  # fmt: skip
    for router in routers:
        app.include_router(router)
    app.router.routes.insert(
        0, api_read.PlainSearch()
    )  # the common search, before the validated one
    _install_errors(app)
    _install_pages(app, state)
    if mcp_app is not None:
        app.add_route("/mcp", mcp_app, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware, allow_origins=settings.cors_origins, allow_headers=["authorization", "content-type", "x-clawkb-request"],
            allow_methods=["GET", "POST"],
        )  # fmt: skip
    app.add_middleware(_Timing, metrics=state.metrics)
    if settings.worker is not None:
        app.add_middleware(_WorkerHeader, worker=settings.worker)
    app.add_middleware(Guard, settings=settings, upload_path="/api/v1/upload")
    return app


class _WorkerHeader:
    """``x-clawkb-worker: N`` on every response of worker N of ``serve --workers``."""

    def __init__(self, app: ASGIApp, worker: int) -> None:
        self.app, self.value = app, str(worker).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_wrapper(msg: Message) -> None:
            if msg["type"] == "http.response.start":
                msg["headers"] = [*msg.get("headers", ()), (b"x-clawkb-worker", self.value)]
            await send(msg)

        await self.app(scope, receive, send_wrapper)


class _Timing:
    """Request counts and latency per route template (``/api/v1/chunks/{anchor}``)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = 500

        async def send_wrapper(msg: Message) -> None:
            nonlocal status
            if msg["type"] == "http.response.start":
                status = msg["status"]
            await send(msg)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            endpoint = getattr(route, "path", None) or (
                "/static" if scope["path"].startswith("/static/") else "other"
            )
            self.metrics.observe_request(
                endpoint, scope["method"], status, time.perf_counter() - t0
            )


def _kb_settings(main: ServerSettings, spec: KBSpec) -> ServerSettings:
    """Another KB's settings: the server's flags and limits, its own roots, inbox and name."""
    import dataclasses

    from clawkb.config import Config
    from clawkb.server.settings import load_settings

    own = load_settings(spec.home, Config.load(spec.home).server, paths=[])
    return dataclasses.replace(
        main, home=spec.home, roots=own.roots, inbox=own.inbox, name=spec.name, kbs=[],
        token=spec.token or main.token, upload_types=own.upload_types or main.upload_types,
        shared_writer=None,  # the workers' shared writer writes the default KB only
    )  # fmt: skip


def _install_errors(app: FastAPI) -> None:
    def shape(
        status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> JSONResponse:
        return JSONResponse({"code": code, "message": message}, status_code=status, headers=headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "error")
        return shape(exc.status_code, code, str(exc.detail), dict(exc.headers or {}))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return shape(422, "invalid_request", validation_message(list(exc.errors())))

    async def domain(request: Request, exc: Exception) -> JSONResponse:
        status, code, message = error_for(exc)
        headers = None
        if code == "rate_limited":
            headers = {"retry-after": str(max(1, int(getattr(exc, "retry_after", 1) + 0.999)))}
        return shape(status, code, message, headers)

    # Known errors are handled inside the middleware stack (so metrics see their
    # status); anything else reaches the outermost handler as `internal`.
    for cls in (ClawkbError, RateLimited, BodyTooLarge, BodyTimeout, Exception):
        app.add_exception_handler(cls, domain)


def _install_pages(app: FastAPI, state: ServerState) -> None:
    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-cache"})

    @app.get("/static/{name}", include_in_schema=False)
    async def static(name: str) -> FileResponse:
        path = STATIC / name
        if "/" in name or name.startswith(".") or not path.is_file():
            raise StarletteHTTPException(404, f"no page asset {name!r}")
        return FileResponse(path, headers={"cache-control": "no-cache"})

    @app.get("/healthz", tags=["health"], summary="The process is up")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], summary="The knowledge base can be read")
    async def readyz() -> Response:
        try:
            counts = await state.runtime.read(lambda kb: {"chunks": kb.status()["chunks"]})
        except Exception as exc:
            return JSONResponse({"code": "not_ready", "message": str(exc)}, status_code=503)
        return JSONResponse({"status": "ready", **counts})

    @app.get("/metrics", tags=["health"], summary="Prometheus metrics")
    async def metrics() -> Response:
        import anyio.to_thread

        body = await anyio.to_thread.run_sync(state.metrics.render)
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")


def _mcp(settings: ServerSettings, runtime: Runtime) -> tuple[Any, Any]:
    """The MCP streamable-HTTP app over its own KB connection; auth is the Guard's. Its
    queries are embedded by the server's embedding worker, as the API's are (no
    model loaded in the server process)."""
    try:
        from mcp.server.transport_security import TransportSecuritySettings

        from clawkb.kb import KnowledgeBase
        from clawkb.mcp.server import build_server
        from clawkb.mcp.tools import KBTools
    except Exception:  # the mcp extra is not installed: serve without /mcp
        settings.mcp = False
        return None, None
    kb = KnowledgeBase.open(settings.home)
    runtime.lend_embedder(kb)
    server = build_server(KBTools(kb))
    inner = server.streamable_http_app(
        streamable_http_path="/mcp",
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        # under `--workers N` a session's next request may reach another worker: each
        # request then stands alone (no session kept in one process's memory)
        stateless_http=settings.worker is not None,
    )

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        try:
            async with server.session_manager.run():
                yield
        finally:
            kb.close()

    return inner, lifespan
