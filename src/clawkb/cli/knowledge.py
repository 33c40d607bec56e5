"""`clawkb learn`, `clawkb learned list|show|approve|reject`, `clawkb links PATH`,
`clawkb tune`, and the content half of `clawkb doctor --content`: agent write-back,
the note graph, weight fitting and the content health check."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from clawkb.cli.common import announce_kb, echo, echo_json, handle_errors, open_kb
from clawkb.errors import NotFoundError

_json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


@click.command("learn")
@click.argument("text", nargs=-1, required=True)
@click.option("--title", help="Short title (default: the first line).")
@click.option("--domain", "-D", help="Domain folder under learned/ (default: general).")
@click.option("--agent", default="agent", show_default=True, help="Who writes this.")
@click.option("--task", default="", help="The task this was learned in.")
@click.option("--outcome", default="", help="How the task ended (success, failure, ...).")
@click.option("--anchor", "anchors", multiple=True, help="Anchor of a passage relied on.")
@click.option("--pending", is_flag=True, default=None, help="Hold for review (not searchable).")
@_json_option
@click.pass_context
@handle_errors
def learn_cmd(
    ctx: click.Context,
    text: tuple[str, ...],
    title: str | None,
    domain: str | None,
    agent: str,
    task: str,
    outcome: str,
    anchors: tuple[str, ...],
    pending: bool | None,
    as_json: bool,
) -> None:
    """Write back what was learned (TEXT, `-` reads stdin) as a Markdown note, tier `learned`."""
    from clawkb.knowledge.writeback import learn, note_id

    body = sys.stdin.read() if text == ("-",) else " ".join(text)
    with open_kb(ctx, create=True) as kb:
        res = learn(
            kb,
            body,
            title=title,
            domain=domain,
            agent=agent,
            task=task,
            outcome=outcome,
            anchors=anchors,
            pending=pending or None,
        )
        from clawkb.cli.dense import embed_written

        embedded = embed_written(kb, quiet=True, as_json=as_json)
        if as_json:
            echo_json({**res.to_dict(kb.home), **({"vectors": embedded} if embedded else {})})
            return
        nid = note_id(res.note.path, kb.home)
        if res.created:
            echo(f"wrote {nid} ({res.note.status}) {res.note.path}")
        else:
            echo(f"updated {nid}: {res.similarity:.0%} like it (history kept) {res.note.path}")
        announce_kb(kb.home)


@click.group("learned")
def learned() -> None:
    """Review notes agents wrote back: list, show, approve (tier team), reject."""


@learned.command("list")
@click.option("--status", type=click.Choice(["pending", "active", "approved", "rejected"]))
@_json_option
@click.pass_context
@handle_errors
def list_cmd(ctx: click.Context, status: str | None, as_json: bool) -> None:
    """Learned notes, newest last."""
    from clawkb.knowledge.writeback import note_id, notes

    with open_kb(ctx) as kb:
        found = notes(kb, status)
        if as_json:
            echo_json([n.to_dict(kb.home) for n in found])
            return
        for n in found:
            echo(
                f"{note_id(n.path, kb.home):40} {n.status:9} {n.meta.get('trust', '')!s:9}"
                f" {n.meta.get('agent', '')!s:12} {n.meta.get('title', '')}"
            )
        if not found:
            echo("no learned notes")


@learned.command("show")
@click.argument("note")
@_json_option
@click.pass_context
@handle_errors
def show_cmd(ctx: click.Context, note: str, as_json: bool) -> None:
    """One note with its provenance and history."""
    from clawkb.knowledge.writeback import find

    with open_kb(ctx) as kb:
        n = find(kb, note)
        data = n.to_dict(kb.home)
    if as_json:
        echo_json(data)
        return
    for key in (
        "id",
        "path",
        "status",
        "trust",
        "domain",
        "agent",
        "created",
        "updated",
        "task",
        "outcome",
    ):
        if data.get(key):
            echo(f"{key}: {data[key]}")
    for a in data["anchors"]:
        echo(f"relied on: #{a}")
    echo(f"history: {len(data['history'])} earlier version(s)")
    echo("")
    echo(data["text"])


@learned.command("approve")
@click.argument("notes", nargs=-1, required=True)
@click.option("--by", "reviewer", default="", help="Reviewer name, kept in the note.")
@click.pass_context
@handle_errors
def approve_cmd(ctx: click.Context, notes: tuple[str, ...], reviewer: str) -> None:
    """Reviewed: the notes move to tier `team` (pending ones become searchable)."""
    from clawkb.knowledge.writeback import approve, note_id

    with open_kb(ctx) as kb:
        for ref in notes:
            n = approve(kb, ref, reviewer)
            echo(f"approved {note_id(n.path, kb.home)} (tier team)")


@learned.command("reject")
@click.argument("notes", nargs=-1, required=True)
@click.option("--reason", default="", help="Why, kept in the note.")
@click.pass_context
@handle_errors
def reject_cmd(ctx: click.Context, notes: tuple[str, ...], reason: str) -> None:
    """Out of the index; the file is kept under learned-rejected/."""
    from clawkb.knowledge.writeback import note_id, reject

    with open_kb(ctx) as kb:
        for ref in notes:
            n = reject(kb, ref, reason)
            echo(f"rejected {note_id(n.path, kb.home)}")


@click.command("links")
@click.argument("path")
@_json_option
@click.pass_context
@handle_errors
def links_cmd(ctx: click.Context, path: str, as_json: bool) -> None:
    """A note's outgoing and incoming links, broken ones marked."""
    from clawkb.knowledge.links import Resolver, all_links

    with open_kb(ctx) as kb:
        key = Path(path).expanduser().resolve().as_posix()
        res = Resolver(kb.conn)
        if key not in res.by_path:
            raise NotFoundError(f"{path}: not in the knowledge base (index it first)")
        rows = all_links(kb.conn, res)
    out = [r for r in rows if r.source == key]
    inc = [r for r in rows if r.target == key and r.source != key]
    if as_json:
        echo_json(
            {
                "path": key,
                "outgoing": [r.to_dict() for r in out],
                "incoming": [r.to_dict() for r in inc],
                "broken": sum(bool(r.broken) for r in out),
            }
        )
        return
    echo(f"{key}")
    echo(f"out ({len(out)}):")
    for r in out:
        frag = f"#{r.fragment}" if r.fragment else ""
        mark = f"  BROKEN: {r.broken}" if r.broken else ""
        echo(f"  line {r.line}: {r.kind} -> {r.target}{frag}{mark}")
    echo(f"in ({len(inc)}):")
    for r in inc:
        echo(f"  {r.source}:{r.line} ({r.kind})")


def content_report(ctx: click.Context, as_json: bool) -> dict[str, Any]:
    """``doctor --content``: run the content checks; print them unless ``as_json``."""
    from clawkb.knowledge.health import check_content

    with open_kb(ctx) as kb:
        report = check_content(kb)
    if not as_json:
        for f in report["findings"]:
            where = f"{f['path']}:{f['line']}" if f.get("line") else f["path"]
            state = "note" if f["check"] == "orphan" else "FAIL"
            echo(f"{state:<6}{f['check']}: {where}: {f['message']}")
        echo("content: " + ", ".join(f"{n} {k}" for k, n in report["counts"].items()))
    return report


@click.command("tune")
@click.argument("golden", type=click.Path(dir_okay=False))
@click.option("--write", "write", is_flag=True, help="Store the fitted weights in config.yaml.")
@_json_option
@click.pass_context
@handle_errors
def tune_cmd(ctx: click.Context, golden: str, write: bool, as_json: bool) -> None:
    """Fit trust and graph weights to a golden file (grid search on one half, checked on
    the other)."""
    from clawkb.knowledge.tune import tune, write_weights

    with open_kb(ctx) as kb:
        report = tune(kb, golden)
        if write:
            report["written"] = str(write_weights(kb, report["weights"]))
    if as_json:
        echo_json(report)
        return
    fit, held = report["fit"], report["held_out"]
    echo(f"{report['queries']} golden queries; MRR@10 default -> tuned")
    echo(f"  fit half:      {fit['default']:.3f} -> {fit['tuned']:.3f}")
    echo(f"  held-out half: {held['default']:.3f} -> {held['tuned']:.3f}")
    echo(f"  weights: {report['weights']}")
    if write:
        echo(f"written to {report['written']}")
