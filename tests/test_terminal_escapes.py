"""Terminal control sequences in file names and contents never reach the terminal.

A hostile file can carry OSC 52 (write the clipboard), OSC 0 (window title),
CSI clear-screen or 8-bit CSI; every human (non-JSON) output of the CLI shows
them as visible symbols instead.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawkb.cli.main import cli

OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"  # clipboard := "rm -rf ~"
TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J\x1b[H"
CSI8 = "\x9b31m"
BIDI = "\u202e"
HOSTILE = OSC52 + TITLE + CLEAR + CSI8 + BIDI + "\r"
#: What must never be printed: ESC, BEL, C1 controls, CR, bidi overrides.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture()
def kb_and_docs(tmp_path: Path) -> tuple[Path, Path]:
    docs = tmp_path / "docs"
    docs.mkdir()
    name = f"evil{OSC52}{CLEAR}name.md"
    (docs / name).write_text(
        f"# Heading {TITLE}\n\nThe escapeword paragraph {HOSTILE} hides sequences.\n"
        f"Second line escapeword {CSI8} more.\n",
        encoding="utf-8",
    )
    (docs / f"broken{TITLE}.json").write_text("{ not json", encoding="utf-8")
    (docs / f"skip{CSI8}.min.js").write_text("x", encoding="utf-8")
    ds = tmp_path / "ds"
    ds.mkdir()
    (ds / "uno.md").write_text(
        f"# Uno\n\n## Pin Aliases\nled{CLEAR}x: 13\n\nled pin escapeword {OSC52}\n",
        encoding="utf-8",
    )
    return tmp_path / "kb", docs


def _out(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args))
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.stdout + res.stderr


def test_no_control_sequence_reaches_the_terminal(kb_and_docs: tuple[Path, Path]) -> None:
    home, docs = kb_and_docs
    kb = ["--kb", str(home)]
    outputs = {
        "index": _out(*kb, "index", str(docs)),
        # the default report counts skips per reason; --verbose names each skipped file
        "index verbose": _out(*kb, "index", "--verbose", str(docs)),
        "datasheets": _out(*kb, "index", "--datasheets", str(docs.parent / "ds")),
        "search": _out(*kb, "search", "escapeword", "--explain"),
        "ask": _out(*kb, "ask", "--no-llm", "escapeword paragraph", "--explain"),
        "context": _out(*kb, "context", "led", "escapeword"),
        "pins": _out(*kb, "pins"),
        "memory store": _out(*kb, "memory", "store", f"remember escapeword {OSC52}"),
        "memory recall": _out(*kb, "memory", "recall", "escapeword"),
        "memory list": _out(*kb, "memory", "list"),
        "error": _out(*kb, "show", f"nochunk{OSC52}"),
        "status": _out(*kb, "status"),
    }
    res = CliRunner().invoke(cli, [*kb, "search", "escapeword", "--json"])
    anchor = json.loads(res.stdout)["hits"][0]["anchor"]
    outputs["show"] = _out(*kb, "show", anchor["id"] if isinstance(anchor, dict) else anchor)
    for command, text in outputs.items():
        assert not RAW.search(text), (command, text)
    # the hostile parts are still visible, as symbols
    assert "␛]52;c;" in outputs["search"] and "␛]0;pwned␇" in outputs["search"]
    assert "broken␛]0;pwned␇.json" in outputs["index"]
    verbose = outputs["index verbose"]
    assert "broken␛]0;pwned␇.json" in verbose and "skipped: " in verbose
    assert any(ln.startswith("skipped: ") and "skip\ufffd31m" in ln for ln in verbose.splitlines())
    assert "␛[2J" in outputs["show"]
    assert "␛]52" in outputs["memory recall"] and "error: not an anchor" in outputs["error"]


def test_json_output_keeps_the_text_escaped_by_json(kb_and_docs: tuple[Path, Path]) -> None:
    home, docs = kb_and_docs
    CliRunner().invoke(cli, ["--kb", str(home), "index", str(docs)])
    res = CliRunner().invoke(cli, ["--kb", str(home), "search", "escapeword", "--json"])
    assert "\x1b" not in res.stdout and "\\u001b]0;pwned\\u0007" in res.stdout
    assert TITLE in json.loads(res.stdout)["hits"][0]["snippet"]  # the text itself is intact


def test_clean_keeps_offsets_tabs_newlines_and_text() -> None:
    from clawkb.cli.common import clean

    text = f"a\tb\n{OSC52}中文 ok"
    out = clean(text)
    assert len(out) == len(text) and out.startswith("a\tb\n␛]52") and out.endswith("中文 ok")
    assert clean("\x7f\x85\u202e\u2066") == "␡\ufffd\ufffd\ufffd"


def test_every_cli_module_prints_through_the_cleaning_functions() -> None:
    """Human output goes through cli.common.echo/emit; no module prints on its own."""
    cli_dir = Path(__file__).resolve().parents[1] / "src" / "clawkb" / "cli"
    offenders = [
        f"{p.name}:{n}"
        for p in sorted(cli_dir.glob("*.py"))
        if p.name != "common.py"
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bclick\.(echo|secho)\(|(?<![\w.])print\(|sys\.std(out|err)\.write", line)
    ]
    assert offenders == []
