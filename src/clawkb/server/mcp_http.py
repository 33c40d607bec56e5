"""``clawkb mcp --http``: the MCP streamable-HTTP endpoint under the server's rules.

The same token rule as ``clawkb serve`` (a non-loopback bind needs a token;
bearer header, constant-time compare), the same Host and Origin checks and
read deadlines, a ``/health`` probe, and the URL printed once the socket listens.
It lives with the HTTP server (whose guard it reuses) and builds on the MCP package,
never the other way round.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer


def serve_mcp(
    home: str | os.PathLike[str],
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    announce: Callable[[str], None] = print,
) -> None:
    """Open the KB at ``home`` and serve its MCP tools at ``http://host:port/mcp`` until
    Ctrl-C. A non-loopback ``host`` needs ``token`` (bearer), as ``clawkb serve`` does.

    The KB is opened before the SDK is imported, so a wrong ``--kb`` fails
    at once with the store's message rather than after a slow import.
    """
    from clawkb.kb import KnowledgeBase

    with KnowledgeBase.open(home) as kb:
        from clawkb.mcp.server import build_server
        from clawkb.mcp.tools import KBTools

        server = build_server(KBTools(kb))
        run_http(server, kb.home, host=host, port=port, token=token, announce=announce)


def run_http(
    server: MCPServer,
    home: Path,
    *,
    host: str,
    port: int,
    token: str | None,
    announce: Callable[[str], None] = print,
) -> None:
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    from clawkb.server import bind, uvicorn_config
    from clawkb.server.security import Guard
    from clawkb.server.settings import ServerSettings

    settings = ServerSettings(home=home, host=host, port=port, token=token)
    settings.check()

    @server.custom_route("/health", methods=["GET"])
    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    guarded = Guard(app, settings, upload_path="")
    sock = bind(host, port)
    settings.port = sock.getsockname()[1]
    config = uvicorn_config(guarded, settings)
    announce(f"MCP on {settings.url}/mcp  (health: {settings.url}/health; knowledge base: {home})")
    uvicorn.Server(config).run(sockets=[sock])
