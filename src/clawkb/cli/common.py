"""Helpers shared by the CLI command modules: opening the KB, errors, output."""

from __future__ import annotations

import json
import sqlite3
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
        except sqlite3.DatabaseError as exc:  # damage found mid-query: one line, not a trace
            click.echo(
                f"error: the knowledge-base store is damaged ({exc}); run `clawkb doctor`",
                err=True,
            )
            sys.exit(2)
        except UnicodeDecodeError as exc:  # e.g. a damaged store row read mid-query
            click.echo(
                f"error: text that is not valid UTF-8 ({exc.reason} at byte {exc.start});"
                " if it comes from the knowledge base, `clawkb doctor` checks the store",
                err=True,
            )
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


@contextmanager
def open_kb(ctx: click.Context, *, create: bool = False) -> Iterator[Any]:
    """Open the knowledge base chosen by --kb / CLAWKB_HOME / discovery."""
    from clawkb.config import resolve_home
    from clawkb.kb import KnowledgeBase

    home = resolve_home(ctx.obj.get("kb") if ctx.obj else None)
    kb = KnowledgeBase.open(home, create=create)
    try:
        yield kb
    finally:
        kb.close()


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
