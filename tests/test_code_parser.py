"""Source-code parser: symbols per language (tree-sitter and fallback) and symbol-first search."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawkb.kb import KnowledgeBase
from clawkb.parsers.code import CodeParser
from clawkb.parsers.code_treesitter import parser_for
from clawkb.types import ParsedDocument

SOURCES = {
    "uart.py": (
        "import os\n\n# Open the port.\n@cached\ndef open_port(name):\n    return name\n\n"
        "class Uart:\n    speed = 9600\n\n    def write(self, data):\n        return open_port(data)\n",
        {("open_port",): (3, 6), ("Uart",): (8, 12), ("Uart", "write"): (11, 12)},
    ),
    "hal.c": (
        '#include "hal.h"\n\n/* Init the UART. */\nint hal_uart_init(uart_t *u, int baud)\n{\n'
        "    if (baud) {\n        return 1;\n    }\n    return 0;\n}\n\nstruct ring {\n    int head;\n};\n"
        "\nstatic void *alloc_buf(size_t n)\n{\n    return 0;\n}\n",
        {("hal_uart_init",): (3, 10), ("ring",): (12, 14), ("alloc_buf",): (16, 19)},
    ),
    "hal.h": (
        "#ifndef HAL_H\n#define HAL_H\n\nstruct uart_cfg {\n    int baud;\n};\n\n"
        "int hal_uart_init(uart_t *u, int baud);\n\n#endif\n",
        {("uart_cfg",): (4, 6)},
    ),
    "driver.cpp": (
        "namespace drv {\nclass Spi {\npublic:\n    int transfer(int b) {\n        return b;\n    }\n};\n}\n",
        {("drv",): (1, 8), ("drv", "Spi"): (2, 7), ("drv", "Spi", "transfer"): (4, 6)},
    ),
    "lib.rs": (
        "/// A ring buffer.\npub struct Ring {\n    head: usize,\n}\n\nimpl Ring {\n"
        "    pub fn push(&mut self, v: u8) {\n        let _ = v;\n    }\n}\n\nfn main() {\n}\n",
        {("Ring",): (1, 4), ("Ring", "push"): (7, 9), ("main",): (12, 13)},
    ),
    "main.go": (
        "package main\n\n// Server serves.\ntype Server struct {\n\tport int\n}\n\n"
        "func (s *Server) Start() error {\n\treturn nil\n}\n\nfunc main() {\n}\n",
        {("Server",): (3, 6), ("Server", "Start"): (8, 10), ("main",): (12, 13)},
    ),
    "app.ts": (
        "export interface Cfg {\n  port: number;\n}\n\nexport class App {\n  start(port: number): void {\n"
        "    console.log(port);\n  }\n}\n\nexport const handler = async (req: Req) => {\n  return req;\n};\n",
        {("Cfg",): (1, 3), ("App",): (5, 9), ("App", "start"): (6, 8), ("handler",): (11, 13)},
    ),
    "util.js": (
        "function debounce(fn, ms) {\n  return fn;\n}\n\nclass Queue {\n  push(x) {\n    return x;\n  }\n}\n",
        {("debounce",): (1, 3), ("Queue",): (5, 9), ("Queue", "push"): (6, 8)},
    ),
    "flash.sh": (
        "#!/bin/sh\nset -e\n\nflash_board() {\n  echo flashing\n}\n\nfunction reset_board {\n  echo reset\n}\n",
        {("flash_board",): (4, 6), ("reset_board",): (8, 10)},
    ),
}


def _spans(doc: ParsedDocument) -> dict[tuple[str, ...], tuple[int, int]]:
    """Qualified name -> span of its first symbol (a Rust struct before its impl)."""
    spans: dict[tuple[str, ...], tuple[int, int]] = {}
    for s in doc.metadata["symbols"]:
        spans.setdefault(tuple(s["qualified_name"].split(".")), (s["line_start"], s["line_end"]))
    return spans


@pytest.mark.parametrize("use_tree_sitter", [True, False], ids=["tree-sitter", "regex"])
@pytest.mark.parametrize("name", sorted(SOURCES))
def test_symbols_and_spans(name: str, use_tree_sitter: bool) -> None:
    source, expected = SOURCES[name]
    doc = CodeParser(use_tree_sitter).parse(source.encode(), f"/repo/{name}")
    assert doc.metadata["symbols_from"] == ("tree-sitter" if use_tree_sitter else "regex")
    spans = _spans(doc)
    for qualified, span in expected.items():
        assert spans.get(qualified) == span, (qualified, spans)
    lines = source.split("\n")
    for sl in doc.slices:
        assert sl.kind == "code" and sl.language == doc.metadata["language"]
        assert sl.text == "\n".join(lines[sl.line_start - 1 : sl.line_end])
    innermost = max(expected, key=len)
    owned = [s for s in doc.slices if s.heading_path == innermost]
    assert owned and owned[0].line_end == expected[innermost][1]


def test_grammars_are_installed_for_every_language() -> None:
    for language in ("python", "c", "cpp", "rust", "go", "javascript", "typescript", "tsx", "bash"):
        assert parser_for(language) is not None, language


def test_function_flags_in_metadata() -> None:
    doc = CodeParser().parse(SOURCES["uart.py"][0].encode(), "uart.py")
    kinds = {
        s["qualified_name"]: (s["kind"], s["is_function_def"]) for s in doc.metadata["symbols"]
    }
    assert kinds == {
        "open_port": ("function", True),
        "Uart": ("class", False),
        "Uart.write": ("method", True),
    }


def test_symbol_search_ranks_definition_first(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "uart.c").write_text(
        '#include "uart.h"\n\n/* Configure the UART peripheral. */\n'
        "int uart_configure(uart_t *u, int baud)\n{\n    u->baud = baud;\n    return 0;\n}\n",
        encoding="utf-8",
    )
    callers = "".join(
        f"void task_{i}(void)\n{{\n    uart_configure(&u{i}, 115200);\n    uart_configure(&u{i}, 9600);\n}}\n\n"
        for i in range(6)
    )
    (repo / "src" / "app.c").write_text(callers, encoding="utf-8")
    (repo / "src" / "uart.h").write_text(
        "int uart_configure(uart_t *u, int baud);\n", encoding="utf-8"
    )
    (repo / "README.md").write_text(
        "# Usage\n\nCall uart_configure before anything else; uart_configure sets the baud.\n",
        encoding="utf-8",
    )
    (repo / "tools.py").write_text(
        "def make_image(path):\n    return build(path)\n\n\nclass Builder:\n    def build(self):\n        make_image('x')\n",
        encoding="utf-8",
    )
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        report = kb.index([repo])
        assert report.failed == 0 and report.added == 5
        for query, path, heading in [
            ("uart_configure", "src/uart.c", ("uart_configure",)),
            ("make_image", "tools.py", ("make_image",)),
            ("build", "tools.py", ("Builder", "build")),
        ]:
            top = kb.search(query, limit=3).hits[0]
            assert top.anchor.path.endswith(path), (query, top.anchor)
            assert top.anchor.heading_path == heading
        top = kb.search("uart_configure", limit=1).hits[0]
        assert (top.anchor.line_start, top.anchor.line_end) == (3, 8)
