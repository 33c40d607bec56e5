"""Helpers shared by the CLI command modules: opening the KB, errors, output.

Human output goes through :func:`echo` (or :func:`emit` for lines the CLI
styles itself, built from :func:`clean` pieces): file names, file contents,
model answers and error messages can carry terminal control sequences (OSC 52
clipboard writes, title changes, clear-screen), so every control character is
shown as a visible symbol instead of reaching the terminal. JSON output is
left to ``json.dumps``, which escapes C0 controls.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import IO, TYPE_CHECKING, ParamSpec, TypeVar

import click

from clawkb.errors import EXIT_ERROR, ClawkbError
from clawkb.store import diskspace

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase
    from clawkb.memory.model import RecallResult
    from clawkb.retrieve.result import SearchResult
    from clawkb.types import JSON

P = ParamSpec("P")
R = TypeVar("R")

#: Exit statuses (docs/cli.md): 0 done; 1 nothing found (search, recall, ask abstained);
#: 2 error or bad usage; 3 done, but some files or folders failed (``index``).
EXIT_FAILURES = 3


def _control_table() -> dict[int, str]:
    """C0 controls (but tab and newline) -> U+2400 pictures, DEL -> U+2421, C1 and
    bidi overrides -> U+FFFD. One character for one, so text offsets stay valid."""
    table = {c: chr(0x2400 + c) for c in range(0x20) if c not in (0x09, 0x0A)}
    table[0x7F] = "\u2421"
    for c in [*range(0x80, 0xA0), 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]:
        table[c] = "\ufffd"
    return table


_CONTROLS = _control_table()


def clean(text: object) -> str:
    """``text`` safe for a terminal: control characters become visible symbols."""
    return str(text).translate(_CONTROLS)


_LINE_BREAKS = {0x09: "\u2409", 0x0A: "\u240a", 0x0B: "\u240b", 0x0C: "\u240c",
                0x0D: "\u240d", 0x85: "\ufffd", 0x2028: "\ufffd", 0x2029: "\ufffd"}  # fmt: skip


def one_line(text: object) -> str:
    """Like :func:`clean`, and tab and line breaks shown too: for a file name, a title or a
    heading printed inside one output line (a name with a newline cannot start a fake hit)."""
    return clean(text).translate(_LINE_BREAKS)


def echo(message: object = "", *, err: bool = False, nl: bool = True) -> None:
    """Print one line of human output (cleaned)."""
    click.secho(clean(message), err=err, nl=nl)


def emit(line: str, *, err: bool = False, nl: bool = True, file: IO[str] | None = None) -> None:
    """Print a line the CLI styled itself; every untrusted piece went through :func:`clean`."""
    click.echo(line, err=err, nl=nl, file=file)


def handle_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn a domain error into a one-line message and its exit code (2 for errors)."""

    @wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except ClawkbError as exc:
            echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except OSError as exc:
            if not diskspace.is_disk_full(exc):
                raise
            echo(f"error: {diskspace.message(exc, _current_home())}", err=True)
            sys.exit(EXIT_ERROR)
        except sqlite3.DatabaseError as exc:  # damage found mid-query: one line, not a trace
            if diskspace.is_disk_full(exc):
                echo(f"error: {diskspace.message(exc, _current_home())}", err=True)
                sys.exit(EXIT_ERROR)
            echo(
                f"error: the knowledge-base store is damaged ({exc}); run `clawkb doctor`",
                err=True,
            )
            sys.exit(EXIT_ERROR)
        except UnicodeDecodeError as exc:  # e.g. a damaged store row read mid-query
            echo(
                f"error: text that is not valid UTF-8 ({exc.reason} at byte {exc.start});"
                " if it comes from the knowledge base, `clawkb doctor` checks the store",
                err=True,
            )
            sys.exit(EXIT_ERROR)

    return wrapper


def _current_home() -> Path | None:
    """The KB folder this command works on, when it can be told (for messages)."""
    from clawkb.config import resolve_home

    try:
        ctx = click.get_current_context(silent=True)
        return Path(resolve_home(ctx.obj.get("kb") if ctx and ctx.obj else None))
    except Exception:
        return None


@contextmanager
def open_kb(
    ctx: click.Context, *, create: bool = False, announce: bool = False
) -> Iterator[KnowledgeBase]:
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


def announce_kb(home: Path) -> None:
    """``knowledge base: /path/.clawkb`` on stderr: every write command says where it wrote,
    so a KB created in an unexpected place is noticed at once. Not with ``--json``
    (machine output stays one JSON document)."""
    click.echo(f"knowledge base: {home}", err=True)


def echo_json(data: JSON) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


def print_result_or_stop(
    ctx: click.Context, res: SearchResult | RecallResult, as_json: bool, empty: str
) -> bool:
    """Shared start of result output: warnings to stderr, then JSON, or an empty result.

    Returns True when the caller should go on to print the hits as text.
    An empty result prints ``empty`` and exits 1, as `grep` does.
    """
    for w in res.warnings:
        echo(f"warning: {w}", err=True)
    if as_json:
        echo_json(res.to_dict())
        return False
    if not res.hits:
        echo(empty)
        ctx.exit(1)
    return True
