"""`clawkb search` and `clawkb show`."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from clawkb.cli.common import (
    clean,
    echo,
    echo_json,
    emit,
    handle_errors,
    one_line,
    open_kb,
    print_result_or_stop,
)
from clawkb.cli.dense import print_pipeline_explain, print_stages, retrieval_options
from clawkb.cli.knowledge_options import print_knowledge_explain
from clawkb.retrieve.hits import anchor_dict

if TYPE_CHECKING:
    from clawkb.retrieve.options import OptionValue


def display_path(path: str) -> str:
    """Show paths relative to the current folder when that is shorter, on one line."""
    if not os.path.isabs(path):
        return one_line(path)
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return one_line(path)
    return one_line(rel if len(rel) < len(path) else path)


@click.command()
@click.argument("query", nargs=-1, required=True)
@click.option("--limit", "-n", default=5, show_default=True, help="How many hits to show.")
@click.option(
    "--path",
    "path_glob",
    multiple=True,
    metavar="GLOB",
    help="Only documents whose path matches (repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (stable schema).")
@click.option(
    "--explain", is_flag=True, help="Show per-term BM25F contributions and field weights."
)
@click.option(
    "--include-memory", is_flag=True, help="Also search agent memories (`clawkb memory`)."
)
@click.option(
    "--board",
    "boards",
    multiple=True,
    metavar="BOARD",
    help="Boost this board's datasheets (repeatable; factor `board_boost` in config.yaml).",
)
@click.option(
    "--board-only", is_flag=True, help="With --board: only that board + generic datasheets."
)
@retrieval_options
@click.pass_context
@handle_errors
def search(
    ctx: click.Context,
    query: tuple[str, ...],
    limit: int,
    path_glob: tuple[str, ...],
    as_json: bool,
    explain: bool,
    include_memory: bool,
    boards: tuple[str, ...],
    board_only: bool,
    **retrieval: OptionValue,
) -> None:
    """Search the knowledge base; every hit names its file, lines and section."""
    from clawkb.retrieve.options import search_kwargs

    text = " ".join(query)
    if board_only and not boards:
        raise click.UsageError("--board-only needs at least one --board BOARD")
    with open_kb(ctx) as kb:
        res = kb.search(
            text,
            limit=limit,
            path_glob=path_glob,
            explain=explain,
            include_memory=include_memory,
            boards=boards,
            board_only=board_only,
            **search_kwargs(retrieval),
        )
    if not print_result_or_stop(ctx, res, as_json, res.message):
        if not res.hits:  # --json: the document printed, the status still says "no match"
            ctx.exit(1)
        return
    if explain:
        print_stages(res)
    color = sys.stdout.isatty()
    from clawkb.retrieve.snippet import highlight

    for hit in res.hits:
        a = hit.anchor
        loc = f"{display_path(a.path)}:{a.line_start}-{a.line_end}" + (
            f" p.{a.page}" if a.page else ""
        )
        head = one_line(" > ".join(a.heading_path) or hit.title)
        emit(
            click.style(f"{hit.rank:>2}. ", bold=True)
            + click.style(clean(loc), fg="cyan" if color else None)
            + clean(f"  [{hit.score:.3f}]  #{a.id}")
        )
        tier = f"  ({hit.trust})" if hit.trust not in (None, "team") else ""  # team: default
        if head or tier:
            echo(f"    § {head}{tier}")
        snip = highlight(
            clean(hit.snippet),
            hit.highlights,
            *(("\x1b[1;33m", "\x1b[0m") if color else ("[", "]")),
        )
        emit(f"    {snip}")
        if explain and hit.explanation:
            print_pipeline_explain(hit.explanation)
            _print_explain(hit.explanation)
        if explain and hit.explanation:
            print_knowledge_explain(hit.explanation)
    total = f" of {res.matched} matching chunks" if res.matched >= 0 else " hits"
    echo(f"({len(res.hits)}{total}, {res.took_ms:.1f} ms)")


def _print_explain(exp: dict[str, Any]) -> None:
    lex = exp.get("lexical")
    if "board" in exp:
        b = exp["board"]
        echo(
            f"      board {b.get('board') or '-'}: x{b['boost']} ({b['before']} -> {exp['final']})"
        )
    if not lex:
        return
    fields = ", ".join(
        f"{k} w={v['weight']} b={v['b']} avg={v['avg_len']}"
        for k, v in lex.get("fields", {}).items()
    )
    echo(f"      BM25F k1={lex.get('k1')} fields: {fields}; doc lens {lex.get('lens')}")
    for t in lex.get("terms", []):
        tf = " ".join(f"{k}={v}" for k, v in t["tf"].items() if v)
        echo(
            f"      {t['term']!r:>16}  +{t['score']:.4f}  idf={t['idf']:.3f} df={t['df']} tf[{tf}]"
        )


@click.command()
@click.argument("anchor")
@click.option(
    "--context",
    "-C",
    "context_lines",
    default=3,
    show_default=True,
    help="Lines of context around the chunk.",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def show(ctx: click.Context, anchor: str, context_lines: int, as_json: bool) -> None:
    """Print a chunk (by anchor id or unique prefix) with surrounding context."""
    with open_kb(ctx) as kb:
        row = kb.chunk(anchor)
        before, after = kb.neighbours(row)
    a = row.to_anchor()
    # Paged sources (PDF) number lines within a page: show the chunk itself.
    lines = (
        _file_lines(row.path, a.line_start - context_lines, a.line_end + context_lines)
        if a.page is None
        else []
    )
    if as_json:
        echo_json(
            {
                **anchor_dict(a),
                "text": row.text,
                "context": [{"line": n, "text": t} for n, t in lines],
                "previous": before[0].anchor if before else None,
                "next": after[0].anchor if after else None,
            }
        )
        return
    page = f" p.{a.page}" if a.page is not None else ""
    echo(f"{display_path(a.path)}:{a.line_start}-{a.line_end}{page}  #{a.id}")
    if a.heading_path:
        echo(f"§ {' > '.join(a.heading_path)}")
    echo("")
    if lines:
        for n, t in lines:
            mark = "│" if a.line_start <= n <= a.line_end else " "
            echo(f"{n:>6} {mark} {t}")
    else:
        echo(row.text)
    nav = [
        f"previous #{before[0].anchor}" if before else "",
        f"next #{after[0].anchor}" if after else "",
    ]
    if any(nav):
        echo("\n" + "   ".join(n for n in nav if n))


def _file_lines(path: str, start: int, end: int) -> list[tuple[int, str]]:
    """Lines of the source file, if it is still there and readable as text."""
    p = Path(path)
    if not p.is_file():
        return []
    try:
        from clawkb.parsers.compressed import readable_bytes
        from clawkb.text.decode import decode_text, looks_binary

        data = readable_bytes(path, p.read_bytes())
        if looks_binary(data):
            return []
        text, _ = decode_text(data, path)
    except Exception:
        return []
    all_lines = text.split("\n")
    start = max(1, start)
    return [(n, all_lines[n - 1]) for n in range(start, min(end, len(all_lines)) + 1)]
