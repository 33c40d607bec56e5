"""The `clawkb` command: a thin layer over :class:`clawkb.kb.KnowledgeBase`.

Each command group lives in its own module; this one wires them together and
owns the global ``--kb`` option.
"""

from __future__ import annotations

import click

from clawkb import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--kb",
    "kb",
    envvar="CLAWKB_HOME",
    metavar="DIR",
    help="Knowledge-base folder (default: ./.clawkb in this or a parent folder, else the user data dir).",
)
@click.version_option(__version__, prog_name="clawkb")
@click.pass_context
def cli(ctx: click.Context, kb: str | None) -> None:
    """clawkb — local-first bilingual knowledge base for engineers and their agents."""
    ctx.ensure_object(dict)
    ctx.obj["kb"] = kb


def _register() -> None:
    from clawkb.cli import evaluate, indexing, searching

    for command in [*indexing.COMMANDS, *searching.COMMANDS, evaluate.eval_cmd, evaluate.check_cmd]:
        cli.add_command(command)


def main() -> None:
    cli(prog_name="clawkb")


_register()


if __name__ == "__main__":
    main()
