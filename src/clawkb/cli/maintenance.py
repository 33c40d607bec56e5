"""`clawkb doctor`, `backup`, `restore`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from clawkb.cli.common import echo, echo_json, handle_errors, open_kb


def _home(ctx: click.Context) -> Path:
    from clawkb.config import resolve_home

    return Path(resolve_home(ctx.obj.get("kb") if ctx.obj else None))


@click.command()
@click.option(
    "--repair", is_flag=True, help="Rebuild a damaged index from the store, drop stray rows."
)
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.option("--wait", default=30.0, show_default=True, help="Seconds to wait for another writer.")
@click.option(
    "--content",
    is_flag=True,
    help="Also check the content: broken links, orphans, duplicates, conflicting facts,"
    " stale notes, the golden file (docs/knowledge.md).",
)
@click.pass_context
@handle_errors
def doctor(ctx: click.Context, repair: bool, as_json: bool, wait: float, content: bool) -> None:
    """Check the store (integrity_check), the index (checksums) and the vectors agree.

    Exits 0 when everything is (now) healthy, 1 when a problem remains.
    """
    from clawkb.maintenance.doctor import run_doctor

    report = run_doctor(_home(ctx), repair=repair, wait=wait)
    data = report.to_dict()
    if not as_json:
        for f in report.findings:
            echo(f.line())
    healthy = report.healthy
    if content:
        from clawkb.cli.knowledge import content_report

        data["content"] = content_report(ctx, as_json)
        healthy = healthy and data["content"]["ok"]
    if as_json:
        echo_json(data)
    if not healthy:
        sys.exit(1)


@click.command()
@click.argument("dest", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def backup(ctx: click.Context, dest: str, as_json: bool) -> None:
    """Write a consistent copy of the knowledge base into the new folder DEST.

    Safe while other processes search and write (SQLite online backup).
    """
    from clawkb.maintenance.backup import backup as run_backup

    with open_kb(ctx) as kb:
        info = run_backup(kb, Path(dest).resolve())
    if as_json:
        echo_json(info)
        return
    echo(
        f"backed up {info['documents']} documents (change {info['store_seq']}) to {dest};"
        f" index: {info['index']}"
    )


@click.command()
@click.argument("src", type=click.Path(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True)
@click.option("--wait", default=30.0, show_default=True, help="Seconds to wait for another writer.")
@click.pass_context
@handle_errors
def restore(ctx: click.Context, src: str, as_json: bool, wait: float) -> None:
    """Replace the knowledge base with the backup in SRC; the index is rebuilt to match."""
    from clawkb.maintenance.backup import restore as run_restore

    info = run_restore(_home(ctx), Path(src).resolve(), wait=wait)
    if as_json:
        echo_json(info)
        return
    echo(
        f"restored {info['documents']} documents ({info['chunks']} chunks) from {src};"
        f" index rebuilt (generation {info['index_generation']})"
    )
