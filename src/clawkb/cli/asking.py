"""`clawkb ask` and `clawkb roles`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from clawkb.cli.common import echo, echo_json, handle_errors, one_line, open_kb
from clawkb.cli.searching import display_path

if TYPE_CHECKING:
    from clawkb.answer.core import Answer


@click.command()
@click.argument("question", nargs=-1, required=True)
@click.option("--limit", "-n", default=8, show_default=True, help="Passages to retrieve.")
@click.option(
    "--role", "-r", default=None, metavar="NAME", help="Prompt role (see `clawkb roles`)."
)
@click.option("--stream", is_flag=True, help="Print the model's tokens as they arrive.")
@click.option(
    "--json", "as_json", is_flag=True, help="Answer, citations, passages and timings as JSON."
)
@click.option(
    "--explain", is_flag=True, help="Show retrieval confidence and why it (did not) abstain."
)
@click.option("--no-llm", is_flag=True, help="Extractive answer even when an LLM is configured.")
@click.pass_context
@handle_errors
def ask(
    ctx: click.Context,
    question: tuple[str, ...],
    limit: int,
    role: str | None,
    stream: bool,
    as_json: bool,
    explain: bool,
    no_llm: bool,
) -> None:
    """Answer QUESTION from the knowledge base, citing numbered sources."""
    from clawkb.answer import answer

    streamed: list[str] = []

    def on_token(piece: str) -> None:
        streamed.append(piece)
        echo(piece, nl=False)

    with open_kb(ctx) as kb:
        res = answer(
            kb,
            " ".join(question),
            limit=limit,
            role=role,
            llm="none" if no_llm else "auto",
            on_token=on_token if stream and not as_json else None,
            explain=explain,
        )
    if as_json:
        echo_json(res.to_dict())
        return
    if streamed:  # streamed once, already renumbered; what changed is in the warnings
        echo()
    else:
        echo(res.text)
    for w in res.warnings:
        echo(f"warning: {w}", err=True)
    _print_sources(res)
    if explain:
        _print_explain(res)
    if res.abstained:
        ctx.exit(1)


def _print_sources(res: Answer) -> None:
    shown = res.passages if res.abstained else res.citations
    if not shown:
        return
    echo("\nnearest passages:" if res.abstained else "\nsources:")
    for p in shown:
        a = p.anchor
        loc = f"{display_path(a.path)}:{a.line_start}-{a.line_end}" + (
            f" p.{a.page}" if a.page else ""
        )
        line = f"  [{p.n}] {loc}  #{a.id}"
        if p.section:
            line += f"  § {one_line(p.section)}"
        echo(line)
        if p.flags:
            echo(f"      ⚠ possible prompt injection: {', '.join(p.flags)}")
        if res.abstained:
            echo(f"      {_first_line(p.text)}")


def _first_line(text: str, width: int = 110) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _print_explain(res: Answer) -> None:
    c = res.confidence
    echo("\nexplain:")
    if c is None:  # nothing was retrieved to judge
        echo(f"  mode={res.mode} role={res.role} model={res.model or '-'} confidence=-")
    else:
        echo(
            f"  mode={res.mode} role={res.role} model={res.model or '-'}"
            f" confidence={c.value:.3f} threshold={c.threshold:.3f}"
            f" → {'abstain' if c.abstain else 'answer'}"
        )
        echo(
            "  confidence = IDF-weighted share of the question's content terms found in the"
            " best of the top 3 passages"
        )
        echo(f"  matched: {', '.join(c.matched) or '-'}")
        echo(f"  missing: {', '.join(c.missing) or '-'}")
    t = res.timings
    echo(
        f"  timings: search {t['search']:.1f} ms, context {t['context']:.1f} ms,"
        f" llm {t['llm']:.1f} ms, total {t['total']:.1f} ms"
    )


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def roles(ctx: click.Context, as_json: bool) -> None:
    """List prompt roles: built-in ones and <kb>/roles/*.yaml."""
    from clawkb.answer.roles import list_roles
    from clawkb.config import resolve_home

    items = list_roles(resolve_home(ctx.obj.get("kb") if ctx.obj else None))
    if as_json:
        echo_json([r.to_dict() for r in items])
        return
    from clawkb.cli.table import echo_table

    echo_table(
        [[r.name, r.description, "" if r.origin == "builtin" else f"({r.origin})"] for r in items]
    )
