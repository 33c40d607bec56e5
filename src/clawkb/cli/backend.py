"""`clawkb sync`, `export`, `import`: the Milvus backend (see docs/milvus.md).

Thin: parse options, call :mod:`clawkb.backends`, format the result.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from clawkb.cli.common import echo, echo_json, handle_errors, open_kb

if TYPE_CHECKING:
    from clawkb.backends.transfer import TransferReport


@click.command("sync")
@click.option("--full", is_flag=True, help="Compare every chunk id instead of replaying the log.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def sync_cmd(ctx: click.Context, full: bool, as_json: bool) -> None:
    """Replay the store's changes into the configured Milvus collection."""
    from clawkb.backends.milvus_kb import sync_kb

    with open_kb(ctx) as kb:
        rep = sync_kb(kb, full=full)
        st = kb.status()["backend"]
    if as_json:
        echo_json({**rep.to_dict(), "backend": st})
        return
    echo(
        f"synced {rep.applied} changes ({rep.upserted} upserted, {rep.deleted} deleted,"
        f" {rep.embedded} embedded{', full compare' if rep.full else ''}"
        f"{', every row rewritten (new row-text version)' if rep.rebuilt else ''})"
        f" in {rep.seconds:.2f} s;"
        f" lag {st['lag_changes']} changes"
    )


@click.command("export")
@click.option(
    "--to",
    "target",
    required=True,
    help="milvus://HOST:PORT/COLLECTION, a *.db Milvus Lite file, or a new folder.",
)
@click.option("--collection", help="Collection name (default: from the address, else clawkb).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def export_cmd(ctx: click.Context, target: str, collection: str | None, as_json: bool) -> None:
    """Copy every chunk and its stored vector to Milvus or a folder (no re-embedding)."""
    from clawkb.backends.transfer import export_kb

    with open_kb(ctx) as kb:
        rep = export_kb(kb, target, collection=collection)
    _report(rep, "exported", as_json)


@click.command("import")
@click.argument("source")
@click.option("--collection", help="Collection name when SOURCE is a Milvus address or file.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handle_errors
def import_cmd(ctx: click.Context, source: str, collection: str | None, as_json: bool) -> None:
    """Copy chunks and vectors from an export folder or a Milvus collection into this KB."""
    from clawkb.backends.transfer import import_kb

    with open_kb(ctx, create=True) as kb:
        rep = import_kb(kb, source, collection=collection)
    _report(rep, "imported", as_json)


def _report(rep: TransferReport, verb: str, as_json: bool) -> None:
    if as_json:
        echo_json(rep.to_dict())
    else:
        echo(
            f"{verb} {rep.chunks} chunks of {rep.documents} documents ({rep.model}) · {rep.target}"
        )


def backend_status_line(b: dict[str, Any]) -> str:
    """The `clawkb status` line for a non-local backend."""
    if b.get("rows") is not None:
        return f"backend         milvus · {b['uri']} · {b['collection']} · {b['rows']} rows"
    lag = b["lag_changes"]
    state = "in sync" if b["synced"] else f"lag {lag} changes"
    return f"backend         milvus · {b['uri']} · {b['collection']} · {state}"


def run_milvus_eval(
    dataset_dir: Path, modes: str, embedder: str | None, limit_queries: int | None, as_json: bool
) -> None:
    """`clawkb eval --backend milvus`."""
    from clawkb.evaluate.compare import MODES, format_comparison
    from clawkb.evaluate.milvus import compare_on_milvus

    wanted = MODES if modes.strip() == "all" else tuple(m.strip() for m in modes.split(","))
    result = compare_on_milvus(
        dataset_dir, modes=wanted, embedder=embedder or "e5-small", limit_queries=limit_queries
    )
    if as_json:
        echo_json({**result.to_dict(), "backend": "milvus"})
    else:
        echo("backend milvus (Milvus Lite)\n" + format_comparison(result))
