"""`clawkb serve` (HTTP API, web page, /mcp, /metrics) and `clawkb watch`."""

from __future__ import annotations

import os
import time
from typing import Any

import click

from clawkb.cli.common import echo, handle_errors


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(file_okay=False))
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address.")
@click.option("--port", default=3000, show_default=True, type=int, help="Port (0 = any free).")
@click.option("--watch", "use_watch", is_flag=True, help="Keep PATHs indexed as files change.")
@click.option(
    "--token",
    envvar="CLAWKB_TOKEN",
    help="Bearer token required on every API call (needed for a non-loopback --host).",
)
@click.option("--inbox", metavar="DIR", help="Folder (inside a PATH) that uploads go to.")
@click.option("--no-mcp", is_flag=True, help="Do not mount the MCP endpoint at /mcp.")
@click.option(
    "--add-kb",
    "add_kbs",
    multiple=True,
    metavar="NAME=KB_DIR",
    help="Serve another knowledge base too, at /api/v1/kb/NAME/ (repeatable; also server.kbs).",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Server processes sharing the port; raise it (up to the free cores) when many"
    " clients search at once and one process is busy all the time.",
)
@click.pass_context
@handle_errors
def serve(
    ctx: click.Context,
    paths: tuple[str, ...],
    host: str,
    port: int,
    use_watch: bool,
    token: str | None,
    inbox: str | None,
    no_mcp: bool,
    add_kbs: tuple[str, ...],
    workers: int,
) -> None:
    """Serve the knowledge base: web page at /, JSON API at /api/v1, MCP at /mcp.

    PATHs are the folders the server may read and index (also `server.roots`
    in config.yaml); they are indexed first when the KB is empty or with
    --watch, which then keeps them current.
    """
    from clawkb.config import Config, resolve_home
    from clawkb.kb import KnowledgeBase
    from clawkb.server import run
    from clawkb.server.settings import load_settings

    home = resolve_home(ctx.obj.get("kb") if ctx.obj else None)
    settings = load_settings(
        home, Config.load(home).server if home.exists() else {}, paths=list(paths),
        inbox=inbox, host=host, port=port, token=token or None, watch=use_watch,
        mcp=not no_mcp, add_kbs=list(add_kbs), workers=workers,
    )  # fmt: skip
    settings.check()
    with KnowledgeBase.open(home, create=bool(paths)) as kb:
        if paths and (use_watch or not kb.status()["documents"]):
            report = kb.index(list(paths), on_wait=lambda m: echo(m, err=True))
            echo(_report_line(report.to_dict()), err=True)
    run(settings, watch=use_watch, announce=echo)


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(file_okay=False, exists=True))
@click.option("--debounce", default=300, show_default=True, help="Milliseconds to wait for quiet.")
@click.pass_context
@handle_errors
def watch(ctx: click.Context, paths: tuple[str, ...], debounce: int) -> None:
    """Index PATHs, then keep them indexed as files change (Ctrl-C stops)."""
    from pathlib import Path

    from clawkb.config import resolve_home
    from clawkb.kb import KnowledgeBase
    from clawkb.server.runtime import Runtime
    from clawkb.watch import Watcher

    home = resolve_home(ctx.obj.get("kb") if ctx.obj else None)
    with KnowledgeBase.open(home, create=True) as kb:
        report = kb.index(list(paths), on_wait=lambda m: echo(m, err=True))
    echo(_report_line(report.to_dict()))
    runtime = Runtime(home)
    watcher = Watcher(
        runtime,
        [Path(os.path.abspath(p)) for p in paths],
        home=home,
        debounce_ms=debounce,
        on_run=_print_run,
    )
    watcher.start()
    echo(f"watching {', '.join(paths)} for {home} (Ctrl-C stops)")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        watcher.stop()
        runtime.close()


def _report_line(r: dict[str, Any]) -> str:
    line = (
        f"indexed: added {r['added']} · updated {r['updated']} · removed {r['removed']} ·"
        f" unchanged {r['unchanged']} · failed {r['failed']} ({r['seconds']:.1f}s)"
    )
    if r.get("reparsed"):
        line += f"\n  re-parsed {r['reparsed']} unchanged file(s): parser changed"
    return line


def _print_run(last: dict[str, Any]) -> None:
    if any(last["counts"].values()) or last["errors"]:  # quiet when nothing changed
        echo(_run_line(last))


def _run_line(last: dict[str, Any]) -> str:
    c = last["counts"]
    line = (
        f"{time.strftime('%H:%M:%S')} {last['events']} change(s): +{c.get('added', 0)}"
        f" ~{c.get('updated', 0)} -{c.get('removed', 0)} ({last['seconds']:.2f}s)"
    )
    if c.get("reparsed"):
        line += f"\n  re-parsed {c['reparsed']} unchanged file(s): parser changed"
    for e in last["errors"]:
        line += f"\n  error: {e['path']}: {e['reason']}"
    return line
