"""Helpers shared by the CLI command modules: opening the KB, errors, output."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, TypeVar

import click

from clawkb.errors import ClawkbError

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """Turn a domain error into a one-line message and exit code 2."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ClawkbError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


@contextmanager
def open_kb(ctx: click.Context, *, create: bool = False, announce: bool = False) -> Iterator[Any]:
    """Open the knowledge base chosen by --kb / CLAWKB_HOME / discovery.

    ``announce``: long write jobs say which KB they write to before they start
    (see :func:`announce_kb`).
    """
    from clawkb.config import resolve_home
    from clawkb.kb import KnowledgeBase

    home = resolve_home(ctx.obj.get("kb") if ctx.obj else None)
    kb = KnowledgeBase.open(home, create=create)
    if announce:
        announce_kb(kb.home)
    try:
        yield kb
    finally:
        kb.close()


def announce_kb(home: Any) -> None:
    """``knowledge base: /path/.clawkb`` on stderr: every write command says where it wrote,
    so a KB created in an unexpected place is noticed at once. Not with ``--json``
    (machine output stays one JSON document)."""
    click.echo(f"knowledge base: {home}", err=True)


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


def print_result_or_stop(ctx: click.Context, res: Any, as_json: bool, empty: str) -> bool:
    """Shared start of result output: warnings to stderr, then JSON, or an empty result.

    Returns True when the caller should go on to print the hits as text.
    An empty result prints ``empty`` and exits 1, as `grep` does.
    """
    for w in res.warnings:
        click.echo(f"warning: {w}", err=True)
    if as_json:
        echo_json(res.to_dict())
        return False
    if not res.hits:
        click.echo(empty)
        ctx.exit(1)
    return True
