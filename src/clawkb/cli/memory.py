"""`clawkb memory store|recall|forget|list`: agent memory from the shell."""

from __future__ import annotations

import datetime as dt
import sys
from typing import Any

import click

from clawkb.cli.common import (
    announce_kb,
    echo,
    echo_json,
    handle_errors,
    open_kb,
    print_result_or_stop,
)
from clawkb.memory.model import MemoryRecord


@click.group()
def memory() -> None:
    """Long-term memory for agents: namespaced, tagged, searchable at once."""


_ns_option = click.option(
    "--namespace", "-N", metavar="NAME", help="Memory namespace (default: all for reads)."
)
_tag_option = click.option(
    "--tag", "-t", "tags", multiple=True, metavar="TAG", help="Tag (repeatable; reads need all)."
)
_json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


@memory.command("store")
@click.argument("text", nargs=-1, required=True)
@click.option("--namespace", "-N", default="default", show_default=True, metavar="NAME")
@_tag_option
@click.option("--importance", type=float, help="0..1 (default 0.5; 1 weighs recall 1.5x).")
@click.option("--ttl", metavar="DURATION", help="Expire after e.g. 3600, 90m, 12h, 7d, 2w.")
@_json_option
@click.pass_context
@handle_errors
def store_cmd(
    ctx: click.Context,
    text: tuple[str, ...],
    namespace: str,
    tags: tuple[str, ...],
    importance: float | None,
    ttl: str | None,
    as_json: bool,
) -> None:
    """Remember TEXT (`-` reads stdin). The same text again updates the same memory."""
    body = sys.stdin.read() if text == ("-",) else " ".join(text)
    from clawkb.cli.dense import embed_written

    with open_kb(ctx, create=True) as kb:
        res = kb.memory.store(body, namespace=namespace, tags=tags, importance=importance, ttl=ttl)
        embedded = embed_written(kb, quiet=True, as_json=as_json)
    if as_json:
        echo_json({**res.to_dict(), **({"vectors": embedded} if embedded else {})})
        return
    verb = "stored" if res.created else "updated (same text already stored)"
    echo(f"{verb} {res.record.id} in {res.record.namespace}")
    announce_kb(kb.home)


@memory.command("recall")
@click.argument("query", nargs=-1, required=True)
@_ns_option
@_tag_option
@click.option("--limit", "-n", default=5, show_default=True)
@click.option("--include-documents", "-d", is_flag=True, help="Blend in document hits.")
@click.option("--explain", is_flag=True, help="Show relevance, importance and recency factors.")
@_json_option
@click.pass_context
@handle_errors
def recall_cmd(
    ctx: click.Context,
    query: tuple[str, ...],
    namespace: str | None,
    tags: tuple[str, ...],
    limit: int,
    include_documents: bool,
    explain: bool,
    as_json: bool,
) -> None:
    """Memories matching QUERY, weighted by importance and recency."""
    with open_kb(ctx) as kb:
        res = kb.memory.recall(
            " ".join(query),
            namespace=namespace,
            limit=limit,
            tags=tags,
            include_documents=include_documents,
            explain=explain,
        )
    if not print_result_or_stop(ctx, res, as_json, f"nothing recalled for {res.query!r}"):
        return
    from clawkb.cli.searching import display_path

    for h in res.hits:
        where = h.memory.namespace if h.memory else display_path(h.hit.anchor.location)
        ident = h.memory.id if h.memory else "#" + h.hit.anchor.id
        echo(f"{h.hit.rank:>2}. [{h.source}] {where}  {ident}  score {h.score:.4f}")
        if h.memory and h.memory.tags:
            echo(f"    tags: {', '.join(h.memory.tags)}")
        echo(f"    {h.hit.snippet}")
        mem = (h.hit.explanation or {}).get("memory")
        if explain and mem:
            echo(
                f"      relevance {mem['relevance']} × weight {mem['weight']}"
                f" (importance {mem['importance']}, age {mem['age_days']} d,"
                f" half-life {mem['half_life_days']} d, floor {mem['recency_floor']})"
            )
    echo(f"({len(res.hits)} results, {res.took_ms:.1f} ms)")


@memory.command("forget")
@click.argument("ids", nargs=-1)
@_ns_option
@_tag_option
@click.option("--query", "-q", metavar="TEXT", help="Memories whose text has every term.")
@click.option("--dry-run", is_flag=True, help="Show what would be forgotten; change nothing.")
@_json_option
@click.pass_context
@handle_errors
def forget_cmd(
    ctx: click.Context,
    ids: tuple[str, ...],
    namespace: str | None,
    tags: tuple[str, ...],
    query: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Forget memories by id (or unique prefix), --tag and/or --query (combined with AND)."""
    with open_kb(ctx) as kb:
        res = kb.memory.forget(ids, tags=tags, query=query, namespace=namespace, dry_run=dry_run)
    if as_json:
        echo_json(res.to_dict())
        return
    for rec in res.records:
        echo(_line(rec))
    verb = "would forget" if dry_run else "forgot"
    echo(f"{verb} {len(res.records)} memor{'y' if len(res.records) == 1 else 'ies'}")
    if not dry_run:
        announce_kb(kb.home)


@memory.command("list")
@_ns_option
@_tag_option
@click.option("--limit", "-n", default=50, show_default=True)
@_json_option
@click.pass_context
@handle_errors
def list_cmd(
    ctx: click.Context, namespace: str | None, tags: tuple[str, ...], limit: int, as_json: bool
) -> None:
    """Live memories, most recently written first."""
    with open_kb(ctx) as kb:
        records = kb.memory.list(namespace=namespace, tags=tags, limit=limit)
        counts = kb.memory.namespaces()
    if as_json:
        data: dict[str, Any] = {
            "namespaces": counts,
            "count": len(records),
            "memories": [r.to_dict() for r in records],
        }
        echo_json(data)
        return
    from clawkb.cli.table import cells

    ns_width = max((cells(r.namespace) for r in records), default=0)
    for rec in records:
        echo(_line(rec, ns_width))
    summary = ", ".join(f"{ns}: {n}" for ns, n in counts.items()) or "none"
    echo(f"({len(records)} shown; namespaces {summary})")


def _line(rec: MemoryRecord, ns_width: int = 0) -> str:
    from clawkb.cli.table import clip, pad

    when = dt.datetime.fromtimestamp(rec.updated_at).strftime("%Y-%m-%d %H:%M")
    tags = f" [{', '.join(rec.tags)}]" if rec.tags else ""
    expiry = ""
    if rec.expires_at is not None:
        expiry = " expires " + dt.datetime.fromtimestamp(rec.expires_at).strftime("%Y-%m-%d %H:%M")
    text = clip(" ".join(rec.text.split()), 80)  # 80 terminal columns, Chinese counts 2
    namespace = pad(rec.namespace, ns_width)
    return f"{rec.id}  {namespace}  {when}  imp {rec.importance:g}{tags}{expiry}\n    {text}"
