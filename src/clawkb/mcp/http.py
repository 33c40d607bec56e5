"""``clawkb mcp --http``: the MCP streamable-HTTP endpoint under the server's rules.

The same token rule as ``clawkb serve`` (a non-loopback bind needs a token;
bearer header, constant-time compare), the same Host and Origin checks and
read deadlines, a ``/health`` probe, and the URL printed once the socket listens.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer


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
