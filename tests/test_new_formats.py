"""Man pages, compressed files, extensionless text, notebooks and e-mail on generated files."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import tarfile
import time
from email.message import EmailMessage
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawkb.cli.main import cli
from clawkb.errors import ParseError, UnsafeFileError
from clawkb.kb import KnowledgeBase
from clawkb.parsers.compressed import CompressedParser
from clawkb.parsers.mail import MailParser
from clawkb.parsers.man import ManParser
from clawkb.parsers.notebook import NotebookParser
from clawkb.parsers.registry import default_registry

MAN = r""".\" generated test page
.TH FROBCTL 8 "2026-01-01" "frob 1.2" "System Administration"
.SH NAME
frobctl \- control the frobnicator daemon
.SH SYNOPSIS
.B frobctl
[\fB\-v\fR] [\fB\-\-timeout\fR=\fIMS\fR]
.I command
.SH DESCRIPTION
.B frobctl
talks to the daemon over its control socket.
.PP
A second paragraph about the \(lqquantum\(rq mode.
.SH OPTIONS
.TP
.BR \-v ", " \-\-verbose
Print every frame sent to the daemon.
.TP
\fB\-\-timeout\fR=\fIMS\fR
Give up after
.I MS
milliseconds (default 250).
.IP "\-q" 4
Quiet mode.
.SS Exit status
.nf
0  success
1  daemon unreachable
.fi
.SH SEE ALSO
.BR frobd (8)
.so man8/other.8
"""

MDOC = """.Dd January 1, 2026
.Dt WIDGET 1
.Os
.Sh NAME
.Nm widget
.Nd draw a widget
.Sh OPTIONS
.Bl -tag -width Ds
.It Fl s Ar size
Set the widget size.
.It Fl x
Extra flag.
.El
"""


def test_man_page_sections_and_options() -> None:
    doc = ManParser().parse(MAN.encode(), "frobctl.8")
    lines = MAN.split("\n")
    assert doc.title == "frobctl - control the frobnicator daemon"
    assert doc.metadata["man"]["section"] == "8"
    heads = [s.text for s in doc.slices if s.heading_path and s.text == s.heading_path[-1]]
    assert heads[:4] == ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS"]
    synopsis = next(
        s for s in doc.slices if s.heading_path == ("SYNOPSIS",) and s.text != "SYNOPSIS"
    )
    assert "frobctl" in synopsis.text and "[-v] [--timeout=MS]" in synopsis.text
    options = [s for s in doc.slices if s.heading_path == ("OPTIONS",) and s.kind == "list"]
    assert [o.text.split(":")[0] for o in options] == ["-v, --verbose", "--timeout=MS", "-q"]
    assert options[1].text == "--timeout=MS: Give up after MS milliseconds (default 250)."
    assert lines[options[1].line_start - 1].startswith(r"\fB\-\-timeout")
    assert lines[options[1].line_end - 1].startswith("milliseconds")
    assert any("“quantum” mode" in s.text for s in doc.slices)
    code = next(s for s in doc.slices if s.kind == "code")
    assert code.heading_path == ("OPTIONS", "Exit status") and "1  daemon unreachable" in code.text
    assert any(".so" in w for w in doc.warnings)  # never followed
    docbook = (
        ".TH GIT 1\n.SH OPTIONS\n.PP\n\\-v, \\-\\-version\n.RS 4\nPrints the version\\&.\n.RE\n"
    )
    item = next(s for s in ManParser().parse(docbook.encode(), "git.1").slices if s.kind == "list")
    assert item.text == "-v, --version: Prints the version." and item.line_start == 4
    mdoc = ManParser().parse(MDOC.encode(), "widget.1")
    assert mdoc.title == "widget - draw a widget"
    items = [s.text for s in mdoc.slices if s.kind == "list"]
    assert items == ["-s size: Set the widget size.", "-x: Extra flag."]


def _tar_gz() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("a.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    return buf.getvalue()


@pytest.mark.parametrize(
    ("name", "pack", "inner_parser"),
    [
        ("frobctl.8.gz", gzip.compress, "man"),
        ("notes.md.bz2", bz2.compress, "markdown"),
        ("changelog.Debian.xz", lzma.compress, "text"),
        ("copyright.gz", gzip.compress, "text"),
    ],
)
def test_compressed_files_read_through(name: str, pack: object, inner_parser: str) -> None:
    body = MAN if inner_parser == "man" else "# Notes\n\nThe frobnicator keeps 42 frames.\n"
    doc = CompressedParser().parse(pack(body.encode()), name)  # type: ignore[operator]
    assert doc.metadata["inner_parser"] == inner_parser
    assert doc.metadata["inner_name"] == name.rsplit(".", 1)[0]
    assert any("frob" in s.text for s in doc.slices)


def test_compressed_bombs_archives_and_garbage_fail_alone() -> None:
    bomb = gzip.compress(bytes(16 << 20), compresslevel=9)  # ~1000x: over the ratio limit
    t0 = time.process_time()
    with pytest.raises(UnsafeFileError, match="bomb refused"):
        CompressedParser().parse(bomb, "bomb.txt.gz")
    assert time.process_time() - t0 < 20
    with pytest.raises(ParseError, match="archive of several files"):
        CompressedParser().parse(_tar_gz(), "docs.tar.gz")
    with pytest.raises(ParseError, match="corrupt gzip"):
        CompressedParser().parse(gzip.compress(b"hello " * 500)[:-30], "cut.txt.gz")
    with pytest.raises(ParseError, match="not a bzip2"):
        CompressedParser().parse(b"plain text", "fake.bz2")
    with pytest.raises(ParseError, match="binary content"):
        CompressedParser().parse(gzip.compress(b"\x00\x01\x02" * 400), "blob.gz")


def _notebook() -> bytes:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "P"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Motor bench\n\nWe measure the stall current."),
        nbformat.v4.new_code_cell(
            "current = read_adc(3)\nprint(current)",
            outputs=[nbformat.v4.new_output("stream", name="stdout", text="1.82 A\n" * 3000)],
        ),
        nbformat.v4.new_markdown_cell("## Results\n\n| run | amps |\n|---|---|\n| 1 | 1.82 |"),
        nbformat.v4.new_code_cell(
            "1/0",
            outputs=[
                nbformat.v4.new_output(
                    "error", ename="ZeroDivisionError", evalue="division by zero"
                )
            ],
        ),
    ]
    return nbformat.writes(nb).encode()


def test_notebook_cells_headings_outputs(capfd: pytest.CaptureFixture[str]) -> None:
    old = (
        b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "markdown",'
    )
    doc = NotebookParser().parse(old + b' "metadata": {}, "source": "# No ids"}]}', "old.ipynb")
    assert doc.title == "No ids" and any("missing an id" in w for w in doc.warnings)
    assert capfd.readouterr().err == ""  # nbformat's warning is the document's, not stderr's
    data = _notebook()
    doc = NotebookParser().parse(data, "bench.ipynb")
    lines = data.decode().split("\n")
    assert doc.title == "Motor bench" and doc.metadata["language"] == "python"
    code = next(s for s in doc.slices if s.kind == "code")
    assert code.language == "python" and code.heading_path == ("Motor bench", "cell 2")
    assert '"cell_type": "code"' in lines[code.line_start - 1]
    out = next(s for s in doc.slices if s.heading_path == ("Motor bench", "cell 2 output"))
    assert out.text.startswith("1.82 A") and out.text.endswith("[output truncated]")
    assert len(out.text) < 2100  # bounded
    table = next(s for s in doc.slices if s.kind == "table")
    assert table.heading_path == ("Motor bench", "Results")
    err = next(s for s in doc.slices if s.heading_path[-1] == "cell 4 output")
    assert err.text == "ZeroDivisionError: division by zero"
    for bad in (b"{}", b'{"cells": 3}', b"[1, 2]", b'{"nbformat": 4, "cells": [{"cell_type": 1}]}'):
        try:
            NotebookParser().parse(bad, "bad.ipynb")
        except ParseError as exc:
            assert exc.path == "bad.ipynb"


MBOX = """From alice@example.org Mon Jan  1 00:00:00 2024
From: Alice <alice@example.org>
To: dev@example.org
Subject: I2C clock stretching on RK809
Date: Mon, 1 Jan 2024 10:00:00 +0000
Message-ID: <1@example.org>

The RK809 stretches SCL for up to 2 ms
during OTP reads.

From bob@example.org Mon Jan  1 01:00:00 2024
From: Bob <bob@example.org>
Subject: Re: I2C clock stretching on RK809
Date: Mon, 1 Jan 2024 11:00:00 +0000
Message-ID: <2@example.org>
In-Reply-To: <1@example.org>
References: <1@example.org>

Raise the bus timeout to 5 ms.

On Mon, Alice wrote:
> The RK809 stretches SCL for up to 2 ms
> during OTP reads.

From carol@example.org Mon Jan  1 02:00:00 2024
From: Carol <carol@example.org>
Subject: Unrelated: PMIC rails
Date: Mon, 1 Jan 2024 12:00:00 +0000
Message-ID: <3@example.org>

VDD_CPU is 0.9 V.
"""


def test_mbox_threads_quotes_and_spans() -> None:
    doc = MailParser().parse(MBOX.encode(), "lkml.mbox")
    lines = MBOX.split("\n")
    assert doc.title == "I2C clock stretching on RK809"
    msgs = doc.metadata["messages"]
    assert [m["thread"] for m in msgs] == ["I2C clock stretching on RK809"] * 2 + [
        "Unrelated: PMIC rails"
    ]
    assert msgs[1]["from"] == "Bob <bob@example.org>" and "2024" in msgs[1]["date"]
    text = "\n".join(s.text for s in doc.slices)
    assert text.count("stretches SCL") == 1  # the quote is not indexed twice
    assert "wrote:" not in text
    reply = next(s for s in doc.slices if "bus timeout" in s.text)
    assert reply.heading_path == (
        "I2C clock stretching on RK809",
        "Re: I2C clock stretching on RK809",
    )
    assert lines[reply.line_start - 1] == "Raise the bus timeout to 5 ms."
    first = next(s for s in doc.slices if "during OTP" in s.text)
    assert (first.line_start, first.line_end) == (8, 9)


def test_eml_with_attachment_through_its_parser() -> None:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = "a@x.org", "b@x.org", "Pin map for rev B"
    msg["Date"] = "Tue, 2 Jan 2024 09:00:00 +0000"
    msg["Message-ID"] = "<9@x.org>"
    msg.set_content("See the attached pin map.\n\n> quoted from a message not here\n")
    msg.add_attachment(b"Pin,Func\nPA5,LED\n", maintype="text", subtype="csv", filename="pins.csv")
    doc = MailParser().parse(msg.as_bytes(), "rev-b.eml")
    assert doc.title == "Pin map for rev B" and doc.metadata["from"] == "a@x.org"
    text = "\n".join(s.text for s in doc.slices)
    assert "quoted from a message not here" in text  # its original is not indexed
    att = [s for s in doc.slices if "attachment: pins.csv" in s.heading_path]
    assert att and any("PA5" in s.text for s in att)


@pytest.mark.parametrize(
    "data",
    [
        b"From x\n\n" * 3,
        b"Subject: =?utf-8?b?broken\n\nbody\n",
        b"From a\nContent-Type: multipart/mixed; boundary=zz\n\n--zz\nContent-Type: text/plain\n",
        b"From: a\nContent-Transfer-Encoding: base64\n\n!!!notbase64!!!\n",
        b"\x00\x01binary",
    ],
)
def test_malformed_mail_is_one_error_or_a_document(data: bytes) -> None:
    try:
        MailParser().parse(data, "bad.mbox")
    except ParseError as exc:
        assert exc.path == "bad.mbox" and "\n" not in str(exc)


def test_registry_lists_the_new_parsers() -> None:
    reg = default_registry()
    for path, name in [
        ("a.rst", "rst"),
        ("ls.1", "man"),
        ("x.3pm", "man"),
        ("a.gz", "compressed"),
        ("b.ipynb", "notebook"),
        ("c.eml", "mail"),
        ("mbox", "mail"),
    ]:
        parser = reg.for_path(path)
        assert parser is not None and parser.name == name, path
    res = CliRunner().invoke(cli, ["parsers"])
    for name in ("rst", "man", "compressed", "notebook", "mail"):
        assert name in res.output


def test_debian_like_tree_indexes_and_summarises_skips(tmp_path: Path) -> None:
    doc = tmp_path / "doc" / "frob"
    doc.mkdir(parents=True)
    (doc / "README.Debian").write_text("frob for Debian\n\nUses systemd units.\n")
    (doc / "changelog.Debian.gz").write_bytes(gzip.compress(b"frob (1.2-1) unstable\n\n  * new\n"))
    (doc / "copyright").write_text("Format: machine-readable\nLicense: MIT\n")
    (doc / "frobctl.8.gz").write_bytes(gzip.compress(MAN.encode()))
    (doc / "NEWS.md.gz").write_bytes(gzip.compress(b"# News\n\nquantum mode added\n"))
    (doc / "examples.conf").write_text("key = value\n")
    (doc / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (doc / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (doc / "bomb.txt.gz").write_bytes(gzip.compress(bytes(16 << 20), compresslevel=9))
    home = tmp_path / "kb"
    res = CliRunner().invoke(cli, ["--kb", str(home), "index", str(tmp_path / "doc")])
    assert res.exit_code == 3, res.output  # the bomb failed, alone
    assert "skipped 3 files" in res.stderr and "skipped: " not in res.stderr
    assert "no parser for '.conf'" in res.stderr and "binary file" in res.stderr
    assert f"failed: {(doc / 'bomb.txt.gz').as_posix()}" in res.stderr
    verbose = CliRunner().invoke(cli, ["--kb", str(home), "index", "-v", str(tmp_path / "doc")])
    assert f"skipped: {(doc / 'examples.conf').as_posix()}" in verbose.stderr
    with KnowledgeBase.open(home) as kb:
        parsers = dict(kb.conn.execute("SELECT path, parser FROM documents"))
        names = {Path(p).name: v for p, v in parsers.items()}
        assert names == {
            "README.Debian": "text",
            "changelog.Debian.gz": "compressed",
            "copyright": "text",
            "frobctl.8.gz": "compressed",
            "NEWS.md.gz": "compressed",
        }
        hit = kb.search("frobnicator daemon socket", mode="lexical").hits[0]
        assert hit.anchor.path.endswith("frobctl.8.gz")
        assert hit.anchor.heading_path[0] == "DESCRIPTION"
        hit = kb.search("quantum mode added", mode="lexical").hits[0]
        assert hit.anchor.path.endswith("NEWS.md.gz") and hit.anchor.heading_path == ("News",)
    js = json.loads(
        CliRunner().invoke(cli, ["--kb", str(home), "index", "--json", str(doc)]).stdout
    )
    assert js["skipped"] == 3


def test_hostile_new_formats_fail_alone_in_the_sandbox(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.rst").write_text("Good\n====\n\nThe persimmon register is 0x40.\n")
    deep = "".join("   " * i + ".. note::\n\n" for i in range(400)) + "   " * 400 + "x\n"
    (docs / "deep.rst").write_text(deep)
    (docs / "bomb.rst.xz").write_bytes(lzma.compress(bytes(32 << 20)))
    (docs / "bad.ipynb").write_text('{"cells": [{"cell_type": "code", "source": ')
    (docs / "junk.mbox").write_bytes(b"\x00\x01\x02 not mail" * 100)
    (docs / "cut.1.gz").write_bytes(gzip.compress(MAN.encode())[:-40])
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        report = kb.index([docs])
        reasons = {Path(p).name: r for p, r in report.errors}
        assert report.added == 1, reasons
        assert set(reasons) == {"deep.rst", "bomb.rst.xz", "bad.ipynb", "junk.mbox", "cut.1.gz"}
        assert all("\n" not in r for r in reasons.values())
        assert "nested too deeply" in reasons["deep.rst"]
        assert "bomb refused" in reasons["bomb.rst.xz"]
        assert "notebook" in reasons["bad.ipynb"] and "binary" in reasons["junk.mbox"]
        assert "corrupt gzip" in reasons["cut.1.gz"]
        hit = kb.search("persimmon register", mode="lexical").hits[0]
        assert hit.anchor.path.endswith("good.rst") and hit.anchor.heading_path == ("Good",)


def test_show_reads_through_a_compressed_file(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "frobctl.8.gz").write_bytes(gzip.compress(MAN.encode()))
    home = str(tmp_path / "kb")
    assert CliRunner().invoke(cli, ["--kb", home, "index", str(docs)]).exit_code == 0
    found = CliRunner().invoke(cli, ["--kb", home, "search", "frobnicator socket", "--json"])
    hit = json.loads(found.stdout)["hits"][0]
    res = CliRunner().invoke(cli, ["--kb", home, "show", hit["anchor"], "--json"])
    context = {c["line"]: c["text"] for c in json.loads(res.stdout)["context"]}
    assert context[hit["line_start"]] == MAN.split("\n")[hit["line_start"] - 1] == ".SH DESCRIPTION"
