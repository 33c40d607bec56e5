"""`clawkb config` (effective settings and their sources) and `clawkb plugins`."""

from __future__ import annotations

import json

import click

from clawkb.cli.common import echo, echo_json, handle_errors

SECRET_KEYS = frozenset({"llm.api_key"})


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the settings as JSON.")
@click.pass_context
@handle_errors
def config(ctx: click.Context, as_json: bool) -> None:
    """Show every effective setting and where it came from (default, config.yaml, env)."""
    from clawkb.cli.table import echo_table
    from clawkb.config import Config, resolve_home
    from clawkb.config.load import effective

    home = resolve_home(ctx.obj.get("kb") if ctx.obj else None)
    rows = [
        (key, "***" if key in SECRET_KEYS and value else value, source)
        for key, value, source in effective(Config.load(home))
    ]
    path = home / "config.yaml"
    if as_json:
        echo_json(
            {
                "knowledge_base": str(home),
                "config_file": str(path) if path.exists() else None,
                "settings": [{"key": k, "value": v, "source": s} for k, v, s in rows],
            }
        )
        return
    echo(f"knowledge base: {home}")
    echo(f"config file:    {path}" + ("" if path.exists() else " (none; all defaults)"))
    echo_table([(k, _show(v), s) for k, v, s in rows], headers=("key", "value", "source"))


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the plugins as JSON.")
@handle_errors
def plugins(as_json: bool) -> None:
    """List parsers, embedders, rerankers and LLM clients with their origin."""
    from clawkb.cli.table import echo_table
    from clawkb.plugins import list_plugins

    found = list_plugins()
    if as_json:
        echo_json([p.to_dict() for p in found])
        return
    echo_table(
        [(p.group.removeprefix("clawkb."), p.name, p.origin, p.target) for p in found],
        headers=("group", "name", "origin", "entry point"),
    )


def _show(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value or '""'
    return json.dumps(value, ensure_ascii=False)
