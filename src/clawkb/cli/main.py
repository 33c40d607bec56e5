"""The `clawkb` command: a thin layer over :class:`clawkb.kb.KnowledgeBase`.

Each command group lives in its own module; this one wires them together and
owns the global ``--kb`` option.
"""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Sequence
from typing import Literal, NoReturn, overload

import click

from clawkb import __version__
from clawkb.cli.common import echo

#: Every command, clawkb's own included, is a ``clawkb.commands`` entry point
#: (pyproject.toml); running one imports only its module (start-up time matters:
#: `clawkb search` should answer in well under a second).
GROUP = "clawkb.commands"


class LazyGroup(click.Group):
    """A group that imports a command's module only when that command runs."""

    def _load(self, name: str) -> None:
        from clawkb.errors import ConfigError
        from clawkb.plugins import commands, load_command

        ep = commands().get(name)
        if ep is not None and name not in self.commands:
            try:
                self.add_command(load_command(ep), name)
            except ConfigError as exc:  # a broken plugin command: one line, exit 1
                raise click.ClickException(str(exc)) from exc

    def list_commands(self, ctx: click.Context) -> list[str]:
        from clawkb.plugins import commands

        for name in commands():
            try:
                self._load(name)
            except click.ClickException as exc:  # the other commands still list
                echo(f"warning: {exc.message}", err=True)
        return super().list_commands(ctx)

    @overload
    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: Literal[True] = True,
        **extra: object,
    ) -> NoReturn: ...

    @overload
    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = ...,
        **extra: object,
    ) -> object: ...

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: object,
    ) -> object:
        """Click's own usage errors start with ``error:`` like every other clawkb error."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
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
            self._load(cmd_name)
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
