"""`clawkb init`, `index`, `reindex`, `status`, `parsers`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click

from clawkb.cli.common import EXIT_FAILURES, echo, echo_json, handle_errors, one_line, open_kb


@click.command()
@click.argument("folder", required=False, type=click.Path(file_okay=False))
@click.pass_context
@handle_errors
def init(ctx: click.Context, folder: str | None) -> None:
    """Create a knowledge base (default: ./.clawkb, or --kb DIR)."""
    from clawkb.kb import KnowledgeBase

    home = Path(folder or ctx.obj.get("kb") or ".clawkb").resolve()
    KnowledgeBase.open(home, create=True).close()
    echo(f"initialised knowledge base in {home}")


@click.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the run report as JSON.")
@click.option("--wait", default=30.0, show_default=True, help="Seconds to wait for another writer.")
@click.option("--quiet", "-q", is_flag=True, help="Only print the summary line.")
@click.option(
    "--verbose", "-v", is_flag=True, help="List every skipped file (default: a count per reason)."
)
@click.option(
    "--datasheets",
    multiple=True,
    metavar="DIR",
    help="A datasheet folder: one board per file (repeatable; default `datasheets:` in config).",
)
@click.option(
    "--include",
    multiple=True,
    metavar="GLOB",
    help="Index files a default ignore skips (minified, vendored, build output; repeatable).",
)
@click.option(
    "--no-embed",
    is_flag=True,
    help="With vectors: leave the new chunks to a later `clawkb embed` (lexical until then).",
)
@click.pass_context
@handle_errors
def index(
    ctx: click.Context,
    paths: tuple[str, ...],
    as_json: bool,
    wait: float,
    quiet: bool,
    verbose: bool,
    datasheets: tuple[str, ...],
    include: tuple[str, ...],
    no_embed: bool = False,
) -> None:
    """Index files and folders incrementally (only changed files are reparsed).

    Once `clawkb embed` has run, the new chunks are embedded too (progress on
    stderr), so they are found in every channel at once.

    Exit status: 0 done, 3 done but some files or folders failed (listed),
    2 error (nothing indexed).
    """
    from clawkb.cli.dense import embed_written
    from clawkb.cli.progress import JobProgress

    with open_kb(ctx, create=True, announce=not as_json) as kb:
        bar = JobProgress(
            "index",
            "files",
            enabled=not as_json and not quiet,
            interval=kb.config.progress_interval_s,
            min_total=50,
        )
        with bar:
            if datasheets or not paths:
                from clawkb.hardware import index_datasheets

                report = index_datasheets(
                    kb,
                    list(paths),
                    list(datasheets),
                    progress=bar,
                    wait=wait,
                    on_wait=lambda m: echo(m, err=True),
                    include=include,
                )
            else:
                report = kb.index(
                    list(paths),
                    progress=bar,
                    wait=wait,
                    on_wait=lambda m: echo(m, err=True),
                    include=include,
                )
        embedded = None if no_embed else embed_written(kb, quiet=quiet, as_json=as_json)
    if as_json:
        echo_json({**report.to_dict(), **({"vectors": embedded} if embedded else {})})
        ctx.exit(EXIT_FAILURES if report.errors else 0)
    if report.resumed:
        echo("note: the previous indexing run was interrupted; resumed", err=True)
    if not quiet:
        for path, reason in report.errors:
            echo(f"failed: {one_line(path)}: {reason}", err=True)
        if verbose:
            for path, reason in report.skipped_files:
                echo(f"skipped: {one_line(path)}: {reason}", err=True)
        else:
            for line in skip_summary(report.skipped_files):
                echo(line, err=True)
        for path, message in report.warnings:
            echo(f"warning: {one_line(path)}: {message}", err=True)
    summary = report.reparse_summary()
    if summary:
        echo(summary)
    echo(
        f"added {report.added} · updated {report.updated} · removed {report.removed} · "
        f"unchanged {report.unchanged} · failed {report.failed} · skipped {report.skipped} "
        f"({report.chunks_added} chunks added, {report.seconds:.2f}s)"
    )
    if report.errors:
        ctx.exit(EXIT_FAILURES)


def skip_summary(skipped: list[tuple[str, str]], shown: int = 12) -> list[str]:
    """Skipped files as one line per reason, most frequent first (``--verbose`` lists files)."""
    if not skipped:
        return []
    counts: dict[str, int] = {}
    for _, reason in skipped:
        key = _SYMLINK_OUT.sub("symlink outside the indexed folder", reason)
        counts[key] = counts.get(key, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    lines = [f"skipped {len(skipped):,} files (--verbose lists them):"]
    lines += [f"  {n:>6,}  {one_line(reason)}" for reason, n in ranked[:shown]]
    if len(ranked) > shown:
        rest = sum(n for _, n in ranked[shown:])
        lines.append(f"  {rest:>6,}  ({len(ranked) - shown} other reasons)")
    return lines


_SYMLINK_OUT = re.compile(r"^symlink to .*, outside the indexed folder.*$", re.S)


@click.command()
@click.option(
    "--vectors", is_flag=True, help="Also drop all vectors and re-embed with the configured model."
)
@click.pass_context
@handle_errors
def reindex(ctx: click.Context, vectors: bool) -> None:
    """Rebuild the lexical index from the store."""
    with open_kb(ctx, announce=True) as kb:
        n = kb.reindex()
    echo(f"reindexed {n} chunks")
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

        echo(f"knowledge base  {st['home']} (remote-only)")
        echo(backend_status_line(backend))
        return
    lex = st["lexical"]
    echo(f"knowledge base  {st['home']}")
    echo(
        f"documents       {st['documents']} ({st['failed']} with errors, {st['tombstones']} removed)"
    )
    echo(f"chunks          {st['chunks']}")
    echo(f"store           {st['store_bytes'] / 1048576:.2f} MB (schema {st['schema_version']})")
    echo(
        f"lexical index   {lex['engine']} · {lex['segments']} segments · {lex['terms']} terms · "
        f"{lex['bytes'] / 1048576:.2f} MB · native kernel {'yes' if lex['native_kernel'] else 'no'}"
    )
    echo(f"tokenizer       v{st['tokenizer_version']}")
    echo(
        f"index check     {st['index_check']} (generation {lex['generation']},"
        f" change {lex['applied_seq']} of {st['store_seq']})"
    )
    for w in st["warnings"]:
        echo(f"warning: {w}", err=True)
    if st.get("dense"):
        from clawkb.cli.dense import dense_status_line

        echo(dense_status_line(st["dense"]))
    if st["last_run"]:
        echo(f"last run        {st['last_run']['status']}")
    if backend.get("kind", "local") != "local":
        from clawkb.cli.backend import backend_status_line

        echo(backend_status_line(backend))


@click.command()
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def parsers(as_json: bool) -> None:
    """List parsers with the extensions and MIME types they claim."""
    from clawkb.parsers.registry import default_registry, install_hint

    registry = default_registry()
    rows = []
    for i in registry.all():
        d = _info_dict(i)
        d["missing"] = install_hint(registry.by_name(i.name)) if i.ok else None
        rows.append(d)
    if as_json:
        echo_json(rows)
        return
    for d in rows:
        note = d["missing"] or (f"error: {d['error']}" if d.get("error") else "")
        echo(
            f"{d['name']:<12} {' '.join(d['extensions']):<28} {' '.join(d['mime_types']):<30} {d['origin']}"
            + (f"  ({note})" if note else "")
        )


def _info_dict(info: object) -> dict[str, Any]:
    from dataclasses import asdict, is_dataclass

    return asdict(info) if is_dataclass(info) and not isinstance(info, type) else dict(vars(info))
