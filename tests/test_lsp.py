"""`clawkb lsp`: a real LSP client (pygls) talking to the server over stdio on the examples KB.

Plus the cursor heuristics (comment / string / identifier / anchor) as plain functions.
"""

from __future__ import annotations

import ast
import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clawkb.lsp.context import target_at

pytest.importorskip("pygls")
from lsprotocol import types
from pygls.lsp.client import LanguageClient

from clawkb.kb import KnowledgeBase

ROOT = Path(__file__).resolve().parents[1]
NOTES = ROOT / "examples" / "notes"

SOURCE = """\
#include "board.h"

// Single-ended trace impedance for the DDR4 address lines?
// (see the layout notes)
static void ddr_init(void) {
    uart_puts("TJA1051 silent mode");  /* CAN transceiver */
    GPIOA_MODER = 0;
    /* clawkb:ANCHOR */
}
int user_id;  // TODO fix this later
"""


@pytest.fixture(scope="module")
def kb_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("lspkb") / ".clawkb"
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([str(NOTES)])
    return home


def test_targets_comment_string_identifier_anchor() -> None:
    lines = SOURCE.splitlines()
    t = target_at(lines, 2, 10, "c")
    assert t is not None and t.kind == "comment"
    assert (
        t.text == "Single-ended trace impedance for the DDR4 address lines? (see the layout notes)"
    )
    assert (t.start, t.end[0]) == ((2, 0), 3)
    t = target_at(lines, 5, 20, "c")
    assert t is not None and (t.kind, t.text) == ("string", "TJA1051 silent mode")
    t = target_at(lines, 5, 45, "c")
    assert t is not None and (t.kind, t.text) == ("comment", "CAN transceiver")
    t = target_at(lines, 6, 8, "c")
    assert t is not None and (t.kind, t.text) == ("identifier", "GPIOA_MODER")
    t = target_at(["x = 1  # see clawkb:#0123abcd here"], 0, 20, "python")
    assert t is not None and (t.kind, t.text) == ("anchor", "0123abcd")
    # '#' inside a string is not a comment; a Python docstring is a string
    t = target_at(['colour = "#fff and more"'], 0, 14, "python")
    assert t is not None and t.kind == "string"
    doc = ["def f():", '    """Boot flow of the', '    RK3568 board."""']
    t = target_at(doc, 1, 12, "python")
    assert t is not None and (t.kind, t.text) == ("string", "Boot flow of the RK3568 board.")
    assert target_at(["    "], 0, 2, "c") is None


async def _stop(client: LanguageClient) -> None:
    """Stop the client; a server still running (a failed step) is killed first."""
    server = getattr(client, "_server", None)
    if server is not None and server.returncode is None:
        try:
            await asyncio.wait_for(server.wait(), 10)
        except TimeoutError:
            server.kill()
    await asyncio.wait_for(client.stop(), 30)


async def _initialize(client: LanguageClient, work: Path) -> None:
    """The handshake, with ``work`` as the workspace root."""
    params = types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=work.as_uri())
    await asyncio.wait_for(client.initialize_async(params), 60)
    client.initialized(types.InitializedParams())


async def _session(kb_home: Path, work: Path) -> dict[str, Any]:
    """Drive the server through every feature; return what came back."""
    client = LanguageClient("clawkb-test", "1")
    shown: list[str] = []

    @client.feature(types.WINDOW_SHOW_DOCUMENT)
    def show_document(params: types.ShowDocumentParams) -> types.ShowDocumentResult:
        shown.append(params.uri)
        return types.ShowDocumentResult(success=True)

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def show_message(params: types.ShowMessageParams) -> None:
        shown.append("message: " + params.message)

    await client.start_io(sys.executable, "-m", "clawkb.cli.main", "--kb", str(kb_home), "lsp")
    out: dict[str, Any] = {"shown": shown}
    try:
        await _initialize(client, work)
        with KnowledgeBase.open(kb_home) as kb:
            gpio = kb.search("GPIOA_MODER reset value", limit=1).hits[0].anchor
        text = SOURCE.replace("ANCHOR", gpio.id)
        uri = (work / "ddr.c").as_uri()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "c", 1, text))
        )
        doc = types.TextDocumentIdentifier(uri)

        async def hover(line: int, col: int) -> types.Hover | None:
            return await client.text_document_hover_async(
                types.HoverParams(doc, types.Position(line, col))
            )

        out["comment"] = await hover(2, 12)
        out["string"] = await hover(5, 20)
        out["identifier"] = await hover(6, 8)
        out["anchor_hover"] = await hover(7, 12)
        out["blank"] = await hover(1, 0)
        out["weak_identifier"] = await hover(9, 6)
        out["weak_comment"] = await hover(9, 25)
        out["symbols"] = await client.workspace_symbol_async(
            types.WorkspaceSymbolParams(query="rkdeveloptool")
        )
        selection = types.Range(types.Position(5, 15), types.Position(5, 22))  # TJA1051
        out["actions"] = await client.text_document_code_action_async(
            types.CodeActionParams(doc, selection, types.CodeActionContext(diagnostics=[]))
        )
        action = out["actions"][0]
        # pygls's client structures the (Command | CodeAction) union as a Command whose
        # `command` is the CodeAction's nested command, turned into its repr
        command = action.command
        if isinstance(command, str) and command.startswith("{"):
            command = ast.literal_eval(command)
        if isinstance(command, dict):
            name, arguments = command["command"], command["arguments"]
        elif isinstance(command, str):
            name, arguments = command, action.arguments
        else:
            name, arguments = command.command, command.arguments
        out["command"] = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(name, arguments)
        )
        out["definition"] = await client.text_document_definition_async(
            types.DefinitionParams(doc, types.Position(7, 12))
        )
        out["gpio"] = gpio
        await client.shutdown_async(None)
        client.exit(None)
    finally:
        await _stop(client)
    return out


def _markdown(h: types.Hover | None) -> str:
    assert h is not None
    assert isinstance(h.contents, types.MarkupContent)
    assert h.contents.kind == types.MarkupKind.Markdown
    return h.contents.value


def test_lsp_over_stdio(kb_home: Path, tmp_path: Path) -> None:
    out = asyncio.run(_session(kb_home, tmp_path))

    comment = _markdown(out["comment"])
    first = comment.split("---")[0]  # the best passage
    assert "ddr-layout.md:" in first and "阻抗控制" in first, comment
    assert re.search(r"\(file://\S+ddr-layout\.md#L\d+\)", first)
    assert out["comment"].range.start == types.Position(2, 0)

    string = _markdown(out["string"]).split("---")[0]
    assert "tja1051.md:" in string, string
    identifier = _markdown(out["identifier"]).split("---")[0]
    assert "registers.md:" in identifier and "GPIOA_MODER" in identifier, identifier
    assert f"#{out['gpio'].id}" in _markdown(out["anchor_hover"])
    assert out["blank"] is None
    # `user_id` only matches "user" and "id" here and there: no card for an identifier;
    # a comment (a sentence) still gets its nearest passages
    assert out["weak_identifier"] is None
    assert "**1.**" in _markdown(out["weak_comment"])

    names = [(Path(s.location.uri).name, s.name) for s in out["symbols"]]
    assert names and names[0][0] == "flashing.md", names

    assert "TJA1051" in out["actions"][0].title
    result = out["command"]
    assert result["hits"] and result["hits"][0]["path"].endswith("tja1051.md")
    assert result["document"] in out["shown"]
    results = Path(result["document"].removeprefix("file://")).read_text("utf-8")
    assert "tja1051.md:" in results

    loc = out["definition"]
    assert loc.uri.endswith("registers.md")
    assert loc.range.start.line == out["gpio"].line_start - 1


async def _no_kb(work: Path) -> list[str]:
    client = LanguageClient("clawkb-test", "1")
    messages: list[str] = []

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def show_message(params: types.ShowMessageParams) -> None:
        messages.append(params.message)

    await client.start_io(sys.executable, "-m", "clawkb.cli.main", "lsp", cwd=str(work))
    try:
        await _initialize(client, work)
        hover = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="ddr"))
        assert hover == []
        await client.shutdown_async(None)
        client.exit(None)
    finally:
        await _stop(client)
    return messages


def test_lsp_without_a_kb_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAWKB_HOME", raising=False)
    messages = asyncio.run(_no_kb(tmp_path))
    assert any("no knowledge base" in m and "--kb" in m for m in messages), messages


def test_lsp_without_the_extra_names_it(tmp_path: Path) -> None:
    """As on an installation without clawkb[lsp]: pygls cannot be imported."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['pygls'] = None\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
    }
    res = subprocess.run(
        [sys.executable, "-m", "clawkb.cli.main", "lsp"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert res.returncode == 2
    assert res.stderr.strip() == (
        "error: `clawkb lsp` needs an optional dependency: pip install 'clawkb[lsp]'"
    )
