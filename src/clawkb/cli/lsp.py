"""`clawkb lsp`: the language server for editors (hover, symbols, code action, definition)."""

from __future__ import annotations

from pathlib import Path

import click

from clawkb.cli.common import handle_errors
from clawkb.errors import MissingDependencyError


@click.command("lsp")
@click.option(
    "--stdio", is_flag=True, help="Talk over stdin/stdout (the default; editors pass it)."
)
@click.pass_context
@handle_errors
def lsp_cmd(ctx: click.Context, stdio: bool) -> None:
    """Run a Language Server over stdio for VS Code, Neovim, Helix and other editors.

    Hover on a comment, a string or an identifier shows the best passages;
    workspace symbols search the knowledge base; a code action searches for
    the selection; go to definition on `clawkb:ANCHOR` opens the source line.
    The KB is --kb / CLAWKB_HOME, else the client's `initializationOptions.kb`,
    else a .clawkb folder in or above the workspace. Needs the `lsp` extra:
    pip install 'clawkb[lsp]'. Setup per editor: docs/editors.md.
    """
    try:
        import pygls  # noqa: F401
    except ImportError:
        raise MissingDependencyError("`clawkb lsp`", "lsp") from None
    from clawkb.lsp import serve

    explicit = ctx.obj.get("kb") if ctx.obj else None
    serve(Path(explicit).expanduser().resolve() if explicit else None)
