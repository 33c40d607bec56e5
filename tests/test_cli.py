"""The `clawkb` command line, driven through click's CliRunner on a real KB."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from clawkb.cli.main import cli
from clawkb.index.lexical import ENGINE
from clawkb.text import TOKENIZER_VERSION

CLAWKB = str(Path(sys.executable).parent / "clawkb")


FILES = {
    "power.md": (
        "# 电源设计\n"
        "\n"
        "总览 buck converter layout, sharedterm.\n"
        "\n"
        "## 去耦电容\n"
        "\n"
        "Place 100nF per VDD pin near the die, decouplingword 电容 sharedterm.\n"
    ),
    "clock.md": "# Clock tree\n\n时钟 PLL settings, sharedterm oscillatorword.\n",
    "notes.txt": "Bring-up notes\n\nUART at 115200 baud sharedterm consoleword.\n",
    "sub/driver.txt": "Driver notes\n\nGPIO interrupt handler sharedterm irqword.\n",
}

RANK_LINE = re.compile(r"^\s*(\d+)\. (\S+):(\d+)-(\d+)  \[(\d+\.\d+)\]  #([0-9a-f]{16})$")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture()
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    for rel, text in FILES.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


@pytest.fixture()
def kb(tmp_path: Path, docs: Path) -> str:
    home = str(tmp_path / "kb")
    res = run("--kb", home, "index", str(docs))
    assert res.exit_code == 0, res.output
    return home


def rank_lines(out: str) -> list[re.Match[str]]:
    return [m for m in map(RANK_LINE.match, out.splitlines()) if m]


def search_json(kb: str, *args: str) -> dict:
    res = run("--kb", kb, "search", *args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_init_creates_store(tmp_path: Path) -> None:
    home = tmp_path / "fresh"
    res = run("--kb", str(home), "init")
    assert res.exit_code == 0
    assert res.stdout.strip() == f"initialised knowledge base in {home.resolve()}"
    assert (home / "clawkb.sqlite").is_file()
    st = run("--kb", str(home), "status", "--json")
    assert json.loads(st.stdout)["documents"] == 0


def test_index_summary_line_counts(tmp_path: Path, docs: Path) -> None:
    home = str(tmp_path / "kb")
    summary = re.compile(
        r"^added (\d+) · updated (\d+) · removed (\d+) · unchanged (\d+) · failed (\d+) · skipped (\d+) "
        r"\((\d+) chunks added, \d+\.\d\ds\)$"
    )
    first = summary.match(run("--kb", home, "index", str(docs)).stdout.strip())
    assert first is not None
    assert first.groups()[:6] == ("4", "0", "0", "0", "0", "0")
    assert int(first.group(7)) >= 4

    (docs / "clock.md").unlink()
    (docs / "notes.txt").write_text(
        "Bring-up notes\n\nchanged and longer text now\n", encoding="utf-8"
    )
    (docs / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 64)
    res = run("--kb", home, "index", str(docs), "--verbose")
    again = summary.match(res.stdout.strip())
    assert again is not None
    assert again.groups()[:6] == ("0", "1", "1", "2", "0", "1")
    assert "skipped: " in res.stderr and "photo.png" in res.stderr

    js = json.loads(run("--kb", home, "index", str(docs), "--json").stdout)
    assert (js["added"], js["updated"], js["removed"], js["unchanged"], js["skipped"]) == (
        0,
        0,
        0,
        3,
        1,
    )


def test_search_rank_line_heading_and_highlight(kb: str, docs: Path) -> None:
    res = run("--kb", kb, "search", "decouplingword")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    ranks = rank_lines(res.stdout)
    assert len(ranks) == 1
    m = ranks[0]
    assert m.group(1) == "1"
    shown = Path(m.group(2))
    path = shown if shown.is_absolute() else Path.cwd() / shown
    assert path.resolve() == (docs / "power.md").resolve()
    start, end = int(m.group(3)), int(m.group(4))
    file_lines = path.read_text(encoding="utf-8").split("\n")
    assert "decouplingword" in "\n".join(file_lines[start - 1 : end])
    assert "    § 电源设计 > 去耦电容" in lines
    assert any("[decouplingword]" in ln for ln in lines)
    assert "\x1b[" not in res.stdout  # not a tty: no colour codes
    assert re.match(r"^\(1 of 1 matching chunks, \d+\.\d ms\)$", lines[-1])


def test_search_json_schema(kb: str, docs: Path) -> None:
    data = search_json(kb, "电容", "sharedterm")
    assert data["query"] == "电容 sharedterm"
    assert data["hits"]
    top = data["hits"][0]
    for key in ("anchor", "path", "line_start", "line_end", "heading_path", "score", "snippet"):
        assert key in top, key
    assert top["path"] == (docs / "power.md").as_posix()
    assert isinstance(top["line_start"], int) and isinstance(top["line_end"], int)
    assert top["line_start"] <= top["line_end"]
    assert isinstance(top["heading_path"], list) and top["heading_path"][0] == "电源设计"
    assert isinstance(top["score"], float) and top["score"] > 0
    assert re.fullmatch(r"[0-9a-f]{16}", top["anchor"])
    assert "电容" in top["snippet"] or "sharedterm" in top["snippet"]
    scores = [h["score"] for h in data["hits"]]
    assert scores == sorted(scores, reverse=True)


def test_search_limit(kb: str) -> None:
    assert len(search_json(kb, "sharedterm")["hits"]) == 5  # every chunk has it
    data = search_json(kb, "sharedterm", "--limit", "2")
    assert len(data["hits"]) == 2 and data["count"] == 2 and data["matched"] == 5
    res = run("--kb", kb, "search", "sharedterm", "-n", "3")
    assert [m.group(1) for m in rank_lines(res.stdout)] == ["1", "2", "3"]


def test_search_path_glob(kb: str, docs: Path) -> None:
    txt = search_json(kb, "sharedterm", "--path", "*.txt", "--limit", "10")
    assert {Path(h["path"]).name for h in txt["hits"]} == {"notes.txt", "driver.txt"}
    sub = search_json(kb, "sharedterm", "--path", "sub/*", "--limit", "10")
    assert [h["path"] for h in sub["hits"]] == [(docs / "sub/driver.txt").as_posix()]
    both = search_json(kb, "sharedterm", "--path", "clock.md", "--path", "sub/*", "--limit", "10")
    assert {Path(h["path"]).name for h in both["hits"]} == {"clock.md", "driver.txt"}
    res = run("--kb", kb, "search", "oscillatorword", "--path", "*.txt")
    assert res.exit_code == 1


def test_search_explain_per_term(kb: str) -> None:
    res = run("--kb", kb, "search", "oscillatorword", "时钟", "--explain")
    assert res.exit_code == 0, res.output
    assert "BM25F k1=" in res.stdout
    term_lines = [
        ln
        for ln in res.stdout.splitlines()
        if re.search(r"\+\d+\.\d{4}  idf=\d+\.\d{3} df=\d+ tf\[", ln)
    ]
    terms = {re.search(r"'([^']+)'", ln).group(1) for ln in term_lines}
    assert {"oscillatorword", "时", "钟", "时钟"} <= terms


def test_no_match_exits_1_with_plain_message(kb: str) -> None:
    res = run("--kb", kb, "search", "nonexistentwordzz")
    assert res.exit_code == 1
    assert res.stdout.strip() == "no match for 'nonexistentwordzz' in the knowledge base"
    assert rank_lines(res.stdout) == []


def test_show_anchor_prints_numbered_lines(kb: str, docs: Path) -> None:
    anchor = search_json(kb, "decouplingword")["hits"][0]["anchor"]
    res = run("--kb", kb, "show", anchor)
    assert res.exit_code == 0, res.output
    out = res.stdout.splitlines()
    assert out[0].endswith(f"  #{anchor}")
    assert "§ 电源设计 > 去耦电容" in out
    numbered = {
        int(m.group(1)): (m.group(2), m.group(3))
        for m in (re.match(r"^\s+(\d+) (│| ) (.*)$", ln) for ln in out)
        if m
    }
    file_lines = (docs / "power.md").read_text(encoding="utf-8").split("\n")
    assert numbered
    for n, (_, text) in numbered.items():
        assert text == file_lines[n - 1]
    marked = [n for n, (mark, _) in numbered.items() if mark == "│"]
    assert any("decouplingword" in numbered[n][1] for n in marked)
    # a unique prefix works too; an unknown anchor is a one-line error
    assert run("--kb", kb, "show", anchor[:10]).stdout == res.stdout
    bad = run("--kb", kb, "show", "ffffffffffffffff")
    assert bad.exit_code == 2 and bad.stderr.startswith("error: no chunk with anchor")


def test_status_shows_counts_engine_tokenizer(kb: str) -> None:
    res = run("--kb", kb, "status")
    assert res.exit_code == 0
    out = res.stdout
    assert re.search(r"^documents\s+4 \(0 with errors, 0 removed\)$", out, re.M)
    assert re.search(r"^chunks\s+5$", out, re.M)
    assert ENGINE in out
    assert re.search(rf"^tokenizer\s+v{re.escape(str(TOKENIZER_VERSION))}$", out, re.M)
    js = json.loads(run("--kb", kb, "status", "--json").stdout)
    assert (js["documents"], js["chunks"], js["lexical"]["engine"]) == (4, 5, ENGINE)


def test_parsers_lists_markdown_and_text() -> None:
    res = run("parsers")
    assert res.exit_code == 0
    rows = {ln.split()[0]: ln for ln in res.stdout.splitlines() if ln.strip()}
    assert ".md" in rows["markdown"].split()
    assert ".txt" in rows["text"].split()
    names = {p["name"] for p in json.loads(run("parsers", "--json").stdout)}
    assert {"markdown", "text"} <= names


def test_reindex_keeps_results_identical(kb: str) -> None:
    queries = ["sharedterm", "电容", "GPIO interrupt", "115200"]

    def results() -> list[list[tuple]]:
        out = []
        for q in queries:
            hits = search_json(kb, q, "--limit", "10")["hits"]
            out.append(
                [
                    (h["anchor"], h["score"], h["line_start"], h["line_end"], h["snippet"])
                    for h in hits
                ]
            )
        return out

    before = results()
    assert all(before)
    res = run("--kb", kb, "reindex")
    assert res.exit_code == 0 and res.stdout.strip() == "reindexed 5 chunks"
    assert results() == before


def test_console_script_entry_point(kb: str, docs: Path) -> None:
    proc = subprocess.run(
        [CLAWKB, "--kb", kb, "search", "consoleword"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    ranks = rank_lines(proc.stdout)
    assert len(ranks) == 1 and ranks[0].group(2).endswith("notes.txt")
    assert "[consoleword]" in proc.stdout
    miss = subprocess.run(
        [CLAWKB, "--kb", kb, "search", "absentwordqq"], capture_output=True, text=True, timeout=60
    )
    assert miss.returncode == 1
    version = subprocess.run([CLAWKB, "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("clawkb")


def test_search_raises_no_deprecation_warning(kb: str) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        res = CliRunner().invoke(cli, ["--kb", kb, "search", "consoleword"], catch_exceptions=False)
    assert res.exit_code == 0


def test_show_names_the_page_of_a_pdf_chunk(tmp_path: Path) -> None:
    pytest.importorskip("pypdfium2")
    pytest.importorskip("reportlab")
    from pdf_samples import text_pdf

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "manual.pdf").write_bytes(
        text_pdf([["Intro page about nothing much."], ["Brownout reset threshold is 2.7 V."]])
    )
    kb = str(tmp_path / "kb")
    runner = CliRunner()
    assert runner.invoke(cli, ["--kb", kb, "index", str(folder)]).exit_code == 0
    res = runner.invoke(cli, ["--kb", kb, "search", "brownout threshold", "--json"])
    hit = json.loads(res.output)["hits"][0]
    assert hit["page"] == 2
    shown = runner.invoke(cli, ["--kb", kb, "show", hit["anchor"]])
    assert shown.exit_code == 0, shown.output
    first = shown.output.splitlines()[0]
    assert " p.2 " in first and first.endswith(hit["anchor"])
    assert "Brownout reset threshold" in shown.output
    assert "%PDF" not in shown.output  # never the raw file bytes
