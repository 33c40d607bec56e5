"""The `clawkb` command: a thin layer over :class:`clawkb.kb.KnowledgeBase`.

Each command group lives in its own module; this one wires them together and
owns the global ``--kb`` option.
"""

from __future__ import annotations

import importlib
import io
import re
import sys
from typing import Any

import click

from clawkb import __version__
from clawkb.cli.common import echo

#: Command modules under clawkb.cli; each exposes ``COMMANDS``.
MODULES = (
    "indexing",
    "searching",
    "evaluate",
    "asking",
    "memory",
    "hardware",
    "mcp",
    "lsp",
    "dense",
    "settings",
    "skill",
    "maintenance",
    "serving",
    "backend",
    "knowledge",
)

#: Which module defines a command, so running one imports only that module
#: (start-up time matters: `clawkb search` should answer in well under a second).
#: A name missing here still works: every module is then loaded.
COMMAND_MODULES = {
    "init": "indexing",
    "index": "indexing",
    "reindex": "indexing",
    "status": "indexing",
    "parsers": "indexing",
    "search": "searching",
    "show": "searching",
    "eval": "evaluate",
    "check": "evaluate",
    "ask": "asking",
    "roles": "asking",
    "memory": "memory",
    "context": "hardware",
    "pins": "hardware",
    "mcp": "mcp",
    "lsp": "lsp",
    "embed": "dense",
    "embedders": "dense",
    "config": "settings",
    "plugins": "settings",
    "skill": "skill",
    "doctor": "maintenance",
    "backup": "maintenance",
    "restore": "maintenance",
    "serve": "serving",
    "watch": "serving",
    "sync": "backend",
    "export": "backend",
    "import": "backend",
    "learn": "knowledge",
    "learned": "knowledge",
    "links": "knowledge",
    "tune": "knowledge",
}


class LazyGroup(click.Group):
    """A group that imports a command's module only when that command runs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaded: set[str] = set()

    def _load(self, module: str) -> None:
        if module in self._loaded:
            return
        self._loaded.add(module)
        mod = importlib.import_module(f"clawkb.cli.{module}")
        for command in mod.COMMANDS:
            self.add_command(command)

    def _load_all(self) -> None:
        for module in MODULES:
            self._load(module)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_all()
        return super().list_commands(ctx)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Click's own usage errors start with ``error:`` like every other clawkb error."""
        run: Any = super().main
        if not kwargs.pop("standalone_mode", True):
            return run(*args, standalone_mode=False, **kwargs)
        try:
            rv = run(*args, standalone_mode=False, **kwargs)
        except click.ClickException as exc:
            buf = io.StringIO()
            exc.show(file=buf)
            echo(re.sub(r"(?m)^Error: ", "error: ", buf.getvalue()), err=True, nl=False)
            sys.exit(exc.exit_code)
        except click.Abort:
            echo("aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            module = COMMAND_MODULES.get(cmd_name)
            if module:
                self._load(module)
            if cmd_name not in self.commands:
                self._load_all()
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--kb",
    "kb",
    envvar="CLAWKB_HOME",
    metavar="DIR",
    help="Knowledge-base folder (default: .clawkb in this or a parent folder, else ./.clawkb).",
)
@click.version_option(__version__, prog_name="clawkb")
@click.pass_context
def cli(ctx: click.Context, kb: str | None) -> None:
    """clawkb — local-first bilingual knowledge base for engineers and their agents."""
    ctx.ensure_object(dict)
    ctx.obj["kb"] = kb


def main() -> None:
    cli(prog_name="clawkb")


if __name__ == "__main__":
    main()
