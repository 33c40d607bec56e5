"""`clawkb mcp`: serve the knowledge base and memory to agents over MCP."""

from __future__ import annotations

import click

from clawkb.cli.common import echo, handle_errors


@click.command("mcp")
@click.option("--http", "use_http", is_flag=True, help="Serve streamable HTTP instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option("--port", default=8765, show_default=True, type=int, help="HTTP port.")
@click.option(
    "--token",
    envvar="CLAWKB_TOKEN",
    help="HTTP: bearer token clients must send (required for a non-loopback --host).",
)
@click.pass_context
@handle_errors
def mcp_cmd(ctx: click.Context, use_http: bool, host: str, port: int, token: str | None) -> None:
    """Run an MCP server (stdio by default; `--http` serves http://HOST:PORT/mcp).

    Over HTTP it prints its URL, answers GET /health, and a non-loopback
    --host needs --token (clients send `Authorization: Bearer TOKEN`).

    Tools: search, ask, get_chunk, memory_store, memory_recall, memory_forget,
    knowledge_write (and hardware_context when hardware support is installed). Needs the
    `mcp` extra: pip install 'clawkb[mcp]'.
    """
    from clawkb.config import resolve_home

    home = resolve_home(ctx.obj.get("kb") if ctx.obj else None)
    if use_http:
        from clawkb.server.mcp_http import serve_mcp
        from clawkb.server.settings import ServerSettings

        ServerSettings(home=home, host=host, port=port, token=token or None).check()
        serve_mcp(home, host=host, port=port, token=token or None, announce=echo)
    else:
        from clawkb.mcp import serve

        serve(home)
