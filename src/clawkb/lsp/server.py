"""The pygls wiring of `clawkb lsp` (extra ``lsp``).

Requests run on the server's one thread, so the KnowledgeBase (and its SQLite
connection) is used from one thread only. The KB is opened on ``initialized``
and warmed with one search, so the first hover costs what every later one does.

KB choice: ``clawkb --kb DIR lsp`` / ``CLAWKB_HOME``, else the client's
``initializationOptions.kb``, else a ``.clawkb`` folder in or above the
workspace root, else in or above the server's working folder.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from clawkb import __version__
from clawkb.errors import ClawkbError
from clawkb.lsp.context import Target, anchor_at, language_of, target_at
from clawkb.lsp.render import chunk_markdown, file_uri, hover_markdown, results_document

if TYPE_CHECKING:
    from pygls.workspace import TextDocument

    from clawkb.kb import KnowledgeBase

#: passages in a hover card / a workspace-symbol list / the results document
HOVER_HITS = 3
SYMBOL_HITS = 30
RESULT_HITS = 10
SEARCH_COMMAND = "clawkb.search"
#: shortest identifier worth a search on hover
MIN_IDENTIFIER = 3
#: below this confidence an identifier's hover stays empty (``user_id`` matching "user"
#: and "id" somewhere is noise); comments and strings are sentences, whose confidence
#: runs lower even when the top passage is right, so they always show their passages
CONFIDENT = 0.5


def uri_path(uri: str) -> Path | None:
    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


class Session:
    """The knowledge base behind one editor session, opened once."""

    def __init__(self, home: Path | None) -> None:
        self.explicit = home
        self.root: Path | None = None
        self.option_kb: str | None = None
        self.kb: KnowledgeBase | None = None
        self.error: str | None = None

    def home(self) -> Path | None:
        from clawkb.config import find_home

        if self.explicit is not None:
            return self.explicit
        if self.option_kb:
            return Path(self.option_kb).expanduser().resolve()
        return (find_home(self.root) if self.root else None) or find_home()

    def open(self) -> KnowledgeBase | None:
        if self.kb is not None or self.error is not None:
            return self.kb
        from clawkb.kb import KnowledgeBase

        home = self.home()
        if home is None or not home.is_dir():
            where = home or "this workspace"
            self.error = (
                f"no knowledge base at {where}; run `clawkb index PATH` there,"
                " or start the server as `clawkb --kb DIR lsp`"
            )
            return None
        try:
            self.kb = KnowledgeBase.open(home)
        except ClawkbError as exc:
            self.error = f"cannot open the knowledge base {home}: {exc}"
        return self.kb

    def search(self, query: str, limit: int) -> list[Any]:
        return self.result(query, limit)[0]

    def result(self, query: str, limit: int) -> tuple[list[Any], float]:
        """The hits and the search's confidence (0 when nothing was found)."""
        kb = self.open()
        if kb is None or not query.strip():
            return [], 0.0
        try:
            res = kb.search(query, limit=limit)
        except ClawkbError:
            return [], 0.0
        return list(res.hits), float(res.confidence)


def _range(start: tuple[int, int], end: tuple[int, int]) -> types.Range:
    return types.Range(types.Position(*start), types.Position(*end))


def _location(path: str, line_start: int, line_end: int) -> types.Location:
    first = max(0, line_start - 1)
    last = max(first, line_end - 1)
    return types.Location(
        file_uri(path), types.Range(types.Position(first, 0), types.Position(last, 0))
    )


def build_server(home: Path | None) -> LanguageServer:
    server = LanguageServer("clawkb", __version__)
    session = Session(home)

    def target(
        params: types.TextDocumentPositionParams | types.HoverParams | types.DefinitionParams,
    ) -> tuple[TextDocument, Target | None]:
        """The document and what the cursor at ``params.position`` points at."""
        doc = server.workspace.get_text_document(params.text_document.uri)
        pos = doc.position_from_client_units(params.position)
        lang = language_of(doc.language_id, doc.uri)
        return doc, target_at(list(doc.lines), pos.line, pos.character, lang)

    def to_client(doc: TextDocument, t: Target) -> types.Range:
        from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

        rng = ServerTextRange(ServerTextPosition(*t.start), ServerTextPosition(*t.end))
        result: types.Range = doc.range_to_client_units(rng)
        return result

    def report(ls: LanguageServer) -> None:
        if session.error and not getattr(session, "reported", False):
            session.reported = True  # type: ignore[attr-defined]
            ls.window_show_message(
                types.ShowMessageParams(types.MessageType.Warning, f"clawkb: {session.error}")
            )

    @server.feature(types.INITIALIZE)
    def initialize(ls: LanguageServer, params: types.InitializeParams) -> None:
        options = params.initialization_options
        if isinstance(options, dict) and isinstance(options.get("kb"), str):
            session.option_kb = options["kb"]
        root = params.root_uri or (
            params.workspace_folders[0].uri if params.workspace_folders else None
        )
        session.root = uri_path(root) if root else None

    @server.feature(types.INITIALIZED)
    def initialized(ls: LanguageServer, params: types.InitializedParams) -> None:
        session.search("clawkb", 1)  # opens the KB and loads the index
        report(ls)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: LanguageServer, params: types.HoverParams) -> types.Hover | None:
        doc, t = target(params)
        if t is None or (t.kind == "identifier" and len(t.text) < MIN_IDENTIFIER):
            return None
        if t.kind == "anchor":
            kb = session.open()
            try:
                row = kb.chunk(t.text) if kb is not None else None
            except ClawkbError:
                row = None
            if row is None:
                return None
            text = chunk_markdown(row, session.root)
        else:
            hits, confidence = session.result(t.text, HOVER_HITS)
            report(ls)
            if not hits or (t.kind == "identifier" and confidence < CONFIDENT):
                return None
            text = hover_markdown(t.text, t.kind, hits, session.root)
        return types.Hover(
            types.MarkupContent(types.MarkupKind.Markdown, text), range=to_client(doc, t)
        )

    @server.feature(types.WORKSPACE_SYMBOL)
    def symbols(
        ls: LanguageServer, params: types.WorkspaceSymbolParams
    ) -> list[types.SymbolInformation]:
        out = []
        for hit in session.search(params.query, SYMBOL_HITS):
            a = hit.anchor
            section = " > ".join(a.heading_path) or hit.title or Path(a.path).name
            out.append(
                types.SymbolInformation(
                    name=section,
                    kind=types.SymbolKind.String,
                    location=_location(a.path, a.line_start, a.line_end),
                    container_name=f"{Path(a.path).name}:{a.line_start} #{a.id}",
                )
            )
        report(ls)
        return out

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.Empty]),
    )
    def code_actions(
        ls: LanguageServer, params: types.CodeActionParams
    ) -> list[types.CodeAction] | None:
        doc = server.workspace.get_text_document(params.text_document.uri)
        text = " ".join(doc.text_in_client_range(params.range).split())
        if not text:
            _doc, t = target(
                types.TextDocumentPositionParams(params.text_document, params.range.start)
            )
            if t is None or t.kind == "anchor":
                return None
            text = t.text
        shown = text if len(text) <= 40 else text[:37] + "…"
        return [
            types.CodeAction(
                title=f"Search the knowledge base for “{shown}”",
                kind=types.CodeActionKind.Empty,
                command=types.Command(
                    title="Search the knowledge base", command=SEARCH_COMMAND, arguments=[text]
                ),
            )
        ]

    @server.command(SEARCH_COMMAND)
    def search_command(ls: LanguageServer, query: str) -> dict[str, Any]:
        """Search; write the hits as a Markdown document and ask the editor to show it."""
        hits = session.search(str(query), RESULT_HITS)
        report(ls)
        folder = Path(tempfile.gettempdir()) / "clawkb-lsp"
        folder.mkdir(exist_ok=True)
        doc = folder / "search-results.md"
        doc.write_text(results_document(str(query), hits, session.root), "utf-8")
        uri = doc.as_uri()
        ls.window_show_document(types.ShowDocumentParams(uri=uri, take_focus=True))
        return {
            "document": uri,
            "hits": [
                {
                    "anchor": h.anchor.id,
                    "path": h.anchor.path,
                    "line": h.anchor.line_start,
                    "section": list(h.anchor.heading_path),
                }
                for h in hits
            ],
        }

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: LanguageServer, params: types.DefinitionParams) -> types.Location | None:
        doc = server.workspace.get_text_document(params.text_document.uri)
        pos = doc.position_from_client_units(params.position)
        lines = doc.lines
        if pos.line >= len(lines):
            return None
        ref = anchor_at(lines[pos.line], pos.character)
        kb = session.open() if ref else None
        if ref is None or kb is None:
            report(ls)
            return None
        try:
            row = kb.chunk(ref.group(1))
        except ClawkbError as exc:
            ls.window_show_message(
                types.ShowMessageParams(types.MessageType.Warning, f"clawkb: {exc}")
            )
            return None
        return _location(row.path, row.line_start, row.line_end)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: LanguageServer, params: object) -> None:
        if session.kb is not None:
            session.kb.close()
            session.kb = None

    return server
