"""Small holes found by probing (issue 20, item 7), each closed.

Durations too long for date arithmetic, NaN/inf weights and TTLs, a file name
that forges a hit line, files that index to nothing, a killed run still shown
as running, and hard links that reach files outside the indexed folder.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawkb import KnowledgeBase
from clawkb.cli.main import cli
from clawkb.durations import parse_duration
from clawkb.errors import ConfigError
from kb_helpers import UART_DOC, build_kb


@pytest.fixture
def kb_docs(tmp_path: Path) -> tuple[Path, Path]:
    return build_kb(tmp_path, UART_DOC)


def run(home: Path, *args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["--kb", str(home), *args])
    return res.exit_code, res.output


@pytest.mark.parametrize("since", ["99999999d", "99999999999y", "1e400"])
def test_huge_since_is_one_clear_line(kb_docs: tuple[Path, Path], since: str) -> None:
    code, out = run(kb_docs[0], "search", "UART", "--since", since)
    assert code == 2, out
    assert "Traceback" not in out and "Overflow" not in out
    assert out.startswith("error:") and out.count("\n") == 1, out


@pytest.mark.parametrize(
    "args", [["--since", "999y"], ["--until", "1000y"], ["--since", "0001-01-01"],
             ["--until", "9999-12-31"]],
)  # fmt: skip
def test_far_times_within_range_just_filter(kb_docs: tuple[Path, Path], args: list[str]) -> None:
    code, out = run(kb_docs[0], "search", "UART", *args)
    assert code in (0, 1) and "Traceback" not in out and "error" not in out, out


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 1e300])
def test_durations_refuse_nan_inf_and_huge(bad: float) -> None:
    with pytest.raises(ConfigError):
        parse_duration(bad, "ttl")
    assert parse_duration("1000y") == 1000 * 365 * 86400.0


def test_nan_and_inf_refused_in_weights_and_ttl(kb_docs: tuple[Path, Path]) -> None:
    home, _ = kb_docs
    for value in ("nan", "inf", "-inf"):
        code, out = run(home, "search", "UART", "--mode", "lexical", "--w-lexical", value)
        assert code == 2 and "finite" in out, out
    with KnowledgeBase.open(home) as kb:
        for ttl in (float("nan"), float("inf")):
            with pytest.raises(ConfigError):
                kb.memory.store("a memory with a broken ttl", ttl=ttl)
    (home / "config.yaml").write_text("retrieval:\n  w_dense: .nan\n")
    code, out = run(home, "search", "UART")
    assert code == 2 and "w_dense" in out, out


def test_a_newline_in_a_file_name_cannot_forge_a_hit(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    forged = "real.md\n 2. forged.md:1-1  [9.999]  #0000000000000000\n    x.md"
    (docs / forged).write_text("# Note\n\nThe quokka register is at 0x40.\n")
    (docs / "tab\there.md").write_text("# Tab\n\nThe quokka timer is 32 kHz.\n")
    home = tmp_path / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([docs])
    code, out = run(home, "search", "quokka", "-n", "5")
    assert code == 0, out
    ranks = [line for line in out.splitlines() if re.match(r"\s*\d+\. ", line)]
    assert len(ranks) == 2, out  # two hits, two hit lines: no forged third
    assert not any(line.lstrip().startswith("2. forged.md") for line in out.splitlines())
    assert "\u240a" in out and "\u2409" in out  # shown as visible symbols
    # The index report's per-file lines too.
    (docs / "blank.md\nfailed: forged.md").write_text("\n \n")
    res = CliRunner().invoke(cli, ["--kb", str(home), "index", str(docs)])
    assert "no searchable text" in res.output, res.output
    assert not [x for x in res.output.splitlines() if x.startswith("failed: forged.md")]


def test_files_that_index_to_nothing_are_warned_about(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    depth = 200_000
    (docs / "deep.html").write_text("<div>" * depth + "deep text" + "</div>" * depth)
    (docs / "blank.md").write_text("\n\n   \n")
    (docs / "empty.md").write_text("")  # an empty file is not worth a warning
    pytest.importorskip("reportlab", reason="needs reportlab (the dev extra)")
    from pdf_samples import text_pdf

    (docs / "degenerate.pdf").write_bytes(text_pdf([[]]))
    home = tmp_path / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        report = kb.index([docs])
    warned = {Path(p).name for p, m in report.warnings}
    assert {"deep.html", "blank.md", "degenerate.pdf"} <= warned, report.warnings
    assert "empty.md" not in warned
    # The CLI prints each one as a warning line.
    res = CliRunner().invoke(cli, ["--kb", str(tmp_path / "kb2"), "index", str(docs)])
    assert "deep.html: no searchable text found" in res.output, res.output


def test_status_after_a_killed_run_is_not_running(kb_docs: tuple[Path, Path]) -> None:
    home, _ = kb_docs
    script = textwrap.dedent(
        f"""
        import sys, time
        from clawkb import KnowledgeBase
        from clawkb.store import runs_repo
        kb = KnowledgeBase.open({str(home)!r})
        with kb.writer():
            with kb.repo.transaction():
                runs_repo.start(kb.conn, "[]", time.time())
            print("running", flush=True)
            time.sleep(120)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "running"
        code, out = run(home, "status", "--json")
        assert json.loads(out)["last_run"]["status"] == "running", out
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    code, out = run(home, "status", "--json")
    assert code == 0 and json.loads(out)["last_run"]["status"] == "interrupted", out
    code, out = run(home, "status")
    assert "running" not in out, out


def test_hard_links_out_of_the_root_are_not_indexed(tmp_path: Path) -> None:
    outside = tmp_path / "private"
    outside.mkdir()
    secret = outside / "secret.md"
    secret.write_text("# Secret\n\nThe wombat password is hunter2.\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ok.md").write_text("# Ok\n\nThe wombat manual is public.\n")
    os.link(secret, docs / "innocent.md")
    home = tmp_path / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        report = kb.index([docs])
        skipped = {Path(p).name: r for p, r in report.skipped_files}
        assert "hard link" in skipped.get("innocent.md", ""), report.skipped_files
        assert not [h for h in kb.search("wombat password hunter2").hits if "hunter2" in h.text]
        # Named directly, the same rule holds.
        kb.index([docs / "innocent.md"])
        assert not [h for h in kb.search("hunter2").hits if "hunter2" in h.text]
    (home / "config.yaml").write_text("follow_symlinks: outside\n")
    with KnowledgeBase.open(home) as kb:
        kb.index([docs])
        assert [h for h in kb.search("hunter2").hits if "hunter2" in h.text]
