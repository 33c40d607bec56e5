"""`clawkb init`, `index`, `reindex`, `status`, `parsers`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from clawkb.cli.common import echo_json, handle_errors, open_kb


@click.command()
@click.argument("folder", required=False, type=click.Path(file_okay=False))
@click.pass_context
@handle_errors
def init(ctx: click.Context, folder: str | None) -> None:
    """Create a knowledge base (default: ./.clawkb, or --kb DIR)."""
    from clawkb.kb import KnowledgeBase

    home = Path(folder or ctx.obj.get("kb") or ".clawkb").resolve()
    KnowledgeBase.open(home, create=True).close()
    click.echo(f"initialised knowledge base in {home}")


@click.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the run report as JSON.")
@click.option("--wait", default=30.0, show_default=True, help="Seconds to wait for another writer.")
@click.option("--quiet", "-q", is_flag=True, help="Only print the summary line.")
@click.option(
    "--datasheets",
    multiple=True,
    metavar="DIR",
    help="A datasheet folder: one board per file (repeatable; default `datasheets:` in config).",
)
@click.pass_context
@handle_errors
def index(
    ctx: click.Context,
    paths: tuple[str, ...],
    as_json: bool,
    wait: float,
    quiet: bool,
    datasheets: tuple[str, ...],
) -> None:
    """Index files and folders incrementally (only changed files are reparsed)."""
    bar = _ProgressBar(enabled=not as_json and not quiet and sys.stderr.isatty())
    with open_kb(ctx, create=True) as kb:
        if datasheets or not paths:
            from clawkb.hardware import index_datasheets

            report = index_datasheets(
                kb,
                list(paths),
                list(datasheets),
                progress=bar.update,
                wait=wait,
                on_wait=lambda m: click.echo(m, err=True),
            )
        else:
            report = kb.index(
                list(paths),
                progress=bar.update,
                wait=wait,
                on_wait=lambda m: click.echo(m, err=True),
            )
    bar.close()
    if as_json:
        echo_json(report.to_dict())
        return
    if report.resumed:
        click.echo("note: the previous indexing run was interrupted; resumed", err=True)
    if not quiet:
        for path, reason in report.errors:
            click.echo(f"failed: {path}: {reason}", err=True)
        for path, reason in report.skipped_files:
            click.echo(f"skipped: {path}: {reason}", err=True)
        for path, message in report.warnings:
            click.echo(f"warning: {path}: {message}", err=True)
    click.echo(
        f"added {report.added} · updated {report.updated} · removed {report.removed} · "
        f"unchanged {report.unchanged} · failed {report.failed} · skipped {report.skipped} "
        f"({report.chunks_added} chunks added, {report.seconds:.2f}s)"
    )


class _ProgressBar:
    """A one-line progress bar on stderr for long runs (silent for short ones)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.shown = False

    def update(self, done: int, total: int, path: str) -> None:
        if not self.enabled or total < 50:
            return
        width = 30
        fill = int(width * done / total)
        name = path[-40:]
        click.echo(
            f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} {name:<40}", err=True, nl=False
        )
        self.shown = True

    def close(self) -> None:
        if self.shown:
            click.echo("", err=True)


@click.command()
@click.option(
    "--vectors", is_flag=True, help="Also drop all vectors and re-embed with the configured model."
)
@click.pass_context
@handle_errors
def reindex(ctx: click.Context, vectors: bool) -> None:
    """Rebuild the lexical index from the store."""
    with open_kb(ctx) as kb:
        n = kb.reindex()
    click.echo(f"reindexed {n} chunks")
    if vectors:
        from clawkb.cli.dense import run_embed

        run_embed(ctx, fresh=True, as_json=False, model=None)


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def status(ctx: click.Context, as_json: bool) -> None:
    """Show counts, sizes, engine and tokenizer version."""
    with open_kb(ctx) as kb:
        st = kb.status()
    if as_json:
        echo_json(st)
        return
    backend = st.get("backend", {})
    if st.get("remote"):
        from clawkb.cli.backend import backend_status_line

        click.echo(f"knowledge base  {st['home']} (remote-only)")
        click.echo(backend_status_line(backend))
        return
    lex = st["lexical"]
    click.echo(f"knowledge base  {st['home']}")
    click.echo(
        f"documents       {st['documents']} ({st['failed']} with errors, {st['tombstones']} removed)"
    )
    click.echo(f"chunks          {st['chunks']}")
    click.echo(
        f"store           {st['store_bytes'] / 1048576:.2f} MB (schema {st['schema_version']})"
    )
    click.echo(
        f"lexical index   {lex['engine']} · {lex['segments']} segments · {lex['terms']} terms · "
        f"{lex['bytes'] / 1048576:.2f} MB · native kernel {'yes' if lex['native_kernel'] else 'no'}"
    )
    click.echo(f"tokenizer       v{st['tokenizer_version']}")
    if st.get("dense"):
        from clawkb.cli.dense import dense_status_line

        click.echo(dense_status_line(st["dense"]))
    if st["last_run"]:
        click.echo(f"last run        {st['last_run']['status']}")
    if backend.get("kind", "local") != "local":
        from clawkb.cli.backend import backend_status_line

        click.echo(backend_status_line(backend))


@click.command()
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def parsers(as_json: bool) -> None:
    """List parsers with the extensions and MIME types they claim."""
    from clawkb.parsers.registry import default_registry

    infos = default_registry().all()
    if as_json:
        echo_json([_info_dict(i) for i in infos])
        return
    for i in infos:
        d = _info_dict(i)
        click.echo(
            f"{d['name']:<12} {' '.join(d['extensions']):<28} {' '.join(d['mime_types']):<30} {d['origin']}"
        )


def _info_dict(info: object) -> dict[str, Any]:
    from dataclasses import asdict, is_dataclass

    return asdict(info) if is_dataclass(info) and not isinstance(info, type) else dict(vars(info))


COMMANDS = [init, index, reindex, status, parsers]
