"""Valid sample files for every built-in format parser (seeds for the fuzzers)."""

from __future__ import annotations

import gzip
import io

from clawkb.parsers.code import CodeParser
from clawkb.parsers.compressed import CompressedParser
from clawkb.parsers.docx import DocxParser
from clawkb.parsers.html import HtmlParser
from clawkb.parsers.mail import MailParser
from clawkb.parsers.man import ManParser
from clawkb.parsers.notebook import NotebookParser
from clawkb.parsers.rst import RstParser
from clawkb.parsers.spreadsheet import CsvParser, XlsxParser
from clawkb.parsers.structured import JsonParser, YamlParser
from clawkb.parsers.subtitles import SubtitleParser
from clawkb.types import ParsedDocument


def _xlsx() -> bytes:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["Pin", "Func"])
    ws.append(["PA5", "LED"])
    ws.merge_cells("A3:B3")
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def _docx() -> bytes:
    import docx

    d = docx.Document()
    d.add_heading("Power", level=1)
    d.add_paragraph("LDO 纹波")
    d.add_table(rows=2, cols=2).cell(0, 0).text = "Rail"
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def samples() -> dict[str, tuple[object, str, bytes]]:
    """name -> (parser, file name, valid bytes)."""
    return {
        "html": (
            HtmlParser(),
            "a.html",
            b"<html><body><h1>T</h1><p>x <a href='u'>l</a></p><table><tr><th>a</th></tr><tr><td>1</td></tr></table><pre>code</pre></body></html>",
        ),
        "srt": (
            SubtitleParser(),
            "a.srt",
            b"1\n00:00:01,000 --> 00:00:02,000\nhello\n\n2\n00:00:03,000 --> 00:00:04,000\n<i>world</i>\n",
        ),
        "vtt": (SubtitleParser(), "a.vtt", b"WEBVTT\n\n00:01.000 --> 00:02.000\n<v A>hi\n"),
        "csv": (CsvParser(), "a.csv", b"Part,Qty\nR1,4\nC2,5\n"),
        "xlsx": (XlsxParser(), "a.xlsx", _xlsx()),
        "docx": (DocxParser(), "a.docx", _docx()),
        "json": (
            JsonParser(),
            "a.json",
            b'{"board": {"pins": {"led": "PA5"}}, "l": [1, 2.5, null, true]}',
        ),
        "jsonl": (JsonParser(), "a.jsonl", b'{"a": 1}\n{"b": [2]}\n'),
        "yaml": (YamlParser(), "a.yaml", b"a: &x\n  b: 1\nc: *x\nd: [1, 2]\n"),
        "python": (
            CodeParser(),
            "a.py",
            b"class A:\n    def f(self):\n        return 1\n\ndef g():\n    pass\n",
        ),
        "c": (CodeParser(), "a.c", b"struct s { int a; };\nint f(int x)\n{\n  return x;\n}\n"),
        "rust": (CodeParser(), "a.rs", b"struct S;\nimpl S {\n    fn f(&self) {}\n}\n"),
        "ts": (CodeParser(), "a.ts", b"export class A {\n  f(): void {}\n}\nconst g = () => 1;\n"),
        "rst": (
            RstParser(),
            "a.rst",
            b"Title\n=====\n\nText :ref:`x <y>` :c:func:`f`.\n\n.. note::\n\n   N\n\n"
            b"+---+---+\n| a | b |\n+===+===+\n| 1 | 2 |\n+---+---+\n\n.. code-block:: c\n\n"
            b"   int x;\n\n.. list-table::\n   :header-rows: 1\n\n   * - H\n   * - v\n",
        ),
        "man": (
            ManParser(),
            "a.1",
            b'.TH A 1\n.SH NAME\na \\- b\n.SH OPTIONS\n.TP\n.BR \\-x ", " \\-\\-y\nDo.\n'
            b".nf\ncode\n.fi\n",
        ),
        "ipynb": (
            NotebookParser(),
            "a.ipynb",
            b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": '
            b'"markdown", "id": "a", "metadata": {}, "source": "# T\\n\\nx"}, {"cell_type": "code",'
            b' "id": "b", "metadata": {}, "execution_count": 1, "source": "1+1", "outputs": '
            b'[{"output_type": "stream", "name": "stdout", "text": "2"}]}]}',
        ),
        "mbox": (
            MailParser(),
            "a.mbox",
            b"From a@x Mon Jan  1 00:00:00 2024\nFrom: a@x\nSubject: S\nMessage-ID: <1@x>\n\n"
            b"Body.\n\nFrom b@x Mon Jan  1 00:00:00 2024\nFrom: b@x\nSubject: Re: S\n"
            b"In-Reply-To: <1@x>\n\nReply.\n> Body.\n",
        ),
        "gz-md": (CompressedParser(), "a.md.gz", gzip.compress(b"# T\n\nx\n")),
        "regex-go": (
            CodeParser(use_tree_sitter=False),
            "a.go",
            b"func (s *S) F() {\n}\ntype S struct {\n}\n",
        ),
    }


def check_document(doc: ParsedDocument) -> None:
    """Invariants every parse result must satisfy."""
    assert isinstance(doc, ParsedDocument)
    for sl in doc.slices:
        assert isinstance(sl.text, str)
        assert 1 <= sl.line_start <= sl.line_end, sl
        assert all(isinstance(h, str) for h in sl.heading_path)
