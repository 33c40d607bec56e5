"""`clawkb context` and `clawkb pins`: hardware mode (see :mod:`clawkb.hardware`)."""

from __future__ import annotations

import click

from clawkb.cli.common import announce_kb, echo, echo_json, handle_errors, open_kb


@click.command()
@click.argument("query", nargs=-1, required=True)
@click.option(
    "--board", "boards", multiple=True, metavar="BOARD", help="A connected board (repeatable)."
)
@click.option("--limit", "-n", default=5, show_default=True, help="How many passages.")
@click.option("--json", "as_json", is_flag=True, help="Aliases and passages as JSON.")
@click.pass_context
@handle_errors
def context(
    ctx: click.Context, query: tuple[str, ...], boards: tuple[str, ...], limit: int, as_json: bool
) -> None:
    """Print the pin aliases and datasheet passages an agent needs for QUERY."""
    from clawkb.hardware import format_context, hardware_context

    if limit < 1:
        raise click.BadParameter("must be at least 1", param_hint="--limit")
    with open_kb(ctx) as kb:
        result = hardware_context(kb, " ".join(query), boards, limit)
    for w in result["warnings"]:
        echo(f"warning: {w}", err=True)
    if as_json:
        echo_json(result)
        return
    text = format_context(result)
    if not text:
        echo(f"no pin alias or datasheet passage for {' '.join(query)!r}")
        ctx.exit(1)
    echo(text, nl=False)


@click.command()
@click.argument("args", nargs=-1, metavar="[BOARD] | set BOARD ALIAS PIN")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def pins(ctx: click.Context, args: tuple[str, ...], as_json: bool) -> None:
    """List pin aliases per board (`pins [BOARD]`) or write one (`pins set BOARD ALIAS PIN`).

    `set` edits the board's Markdown devices file in the datasheet folder
    (creating `<board>.md` with a `## Pin Aliases` table if needed) and
    re-indexes it.
    """
    from clawkb.hardware import list_pins, set_pin

    if args and args[0] == "set":
        if len(args) != 4:
            raise click.UsageError("usage: clawkb pins set BOARD ALIAS PIN")
        with open_kb(ctx) as kb:
            edit = set_pin(kb, args[1], args[2], args[3])
        if as_json:
            echo_json(edit.to_dict())
            return
        was = f" (was pin {edit.previous})" if edit.previous else ""
        echo(f"{edit.board}: {edit.alias} = pin {edit.pin}{was}  -> {edit.path}:{edit.line}")
        announce_kb(kb.home)
        return
    if len(args) > 1:
        raise click.UsageError("usage: clawkb pins [BOARD]  or  clawkb pins set BOARD ALIAS PIN")
    with open_kb(ctx) as kb:
        listing = list_pins(kb, args[0] if args else None)
    if as_json:
        echo_json(listing)
        return
    if not listing["boards"]:
        echo("no pin aliases (add a `## Pin Aliases` section to a datasheet)")
    from clawkb.cli.table import echo_table

    for board, aliases in listing["boards"].items():
        echo(board or "generic")
        rows = []
        for a in aliases:
            anchor = f" #{a['anchor']}" if a["anchor"] else ""
            extra = ", ".join(f"{k}: {v}" for k, v in a["extra"].items())
            where = f"{a['path']}:{a['line']}{anchor}"
            rows.append([a["alias"], f"pin {a['pin']}", where, f"({extra})" if extra else ""])
        echo_table(rows, indent=2)
    for c in listing["conflicts"]:
        echo(f"conflict: {c}", err=True)
