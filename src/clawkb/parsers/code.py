"""Source-code parser: one ``code`` slice per function/class/struct, named by symbol.

Languages: Python, C and C++ (sources and headers), Rust, Go, JavaScript,
TypeScript/TSX and shell. Symbols come from tree-sitter grammars when their
PyPI wheels are installed (``clawkb[formats]``), else from the regex/indent
fallback; the document metadata says which (``symbols_from``) and lists
every symbol with its kind, line span and ``is_function_def``.

Why symbols matter for search: each definition's qualified name is its
slice's heading path, which the lexical index puts in the title field
(weight 2.0), so searching ``hal_uart_init`` ranks the function's definition
above files that merely call it.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import ClassVar

from clawkb.parsers import code_regex, code_treesitter
from clawkb.parsers.code_symbols import Symbol, symbol_slices
from clawkb.parsers.safety import guard
from clawkb.parsers.sniff import decode_text_or_reject
from clawkb.types import ParsedDocument

LANGUAGES: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".rs": "rust",
    ".go": "go",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".sh": "bash",
    ".bash": "bash",
    ".zsh": "bash",
}
#: Languages whose fallback patterns are shared with a sibling.
_FALLBACK_LANGUAGE = {"tsx": "typescript"}


class CodeParser:
    """Parser for source files; ``use_tree_sitter=False`` forces the fallback."""

    name: ClassVar[str] = "code"
    extensions: ClassVar[tuple[str, ...]] = tuple(LANGUAGES)
    mime_types: ClassVar[tuple[str, ...]] = (
        "text/x-python",
        "text/x-c",
        "text/x-c++",
        "text/rust",
        "text/x-go",
        "text/javascript",
        "application/javascript",
        "application/typescript",
        "application/x-sh",
        "text/x-shellscript",
    )

    def __init__(self, use_tree_sitter: bool = True) -> None:
        self.use_tree_sitter = use_tree_sitter

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        language = LANGUAGES.get(PurePath(path).suffix.lower(), "text")
        text, encoding = decode_text_or_reject(data, path, f"{language} source")
        with guard(path, f"{language} source"):
            symbols, source = self._symbols(text, language)
        lines = text.split("\n")
        shown = "typescript" if language == "tsx" else language
        slices = symbol_slices(lines, symbols, shown)
        metadata = {
            "language": shown,
            "symbols_from": source,
            "symbols": [s.to_dict() for s in symbols],
        }
        return ParsedDocument(tuple(slices), PurePath(path).name, metadata, encoding)

    def _symbols(self, text: str, language: str) -> tuple[list[Symbol], str]:
        if self.use_tree_sitter:
            # tree-sitter counts rows by "\n", as the decoded text does
            found = code_treesitter.find_symbols(text.encode("utf-8"), language)
            if found is not None:
                return found, "tree-sitter"
        fallback = _FALLBACK_LANGUAGE.get(language, language)
        return code_regex.find_symbols(text, fallback), "regex"
