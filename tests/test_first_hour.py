"""What a new user meets in the first hour: the command on the PATH, one error style,
one-line argument errors over HTTP, missing paths counted as failed.

(BEIR's `qrels/test.tsv` layout is in test_beir_eval.py; MCP's one-line argument
errors and the documented tool list in test_mcp.py.)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawkb.cli.main import cli

REPO = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"failed (\d+)")


def test_index_counts_a_missing_path_as_failed(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nUART2 baud rate 1500000.\n", "utf-8")
    kb = str(tmp_path / "kb")
    res = CliRunner().invoke(cli, ["--kb", kb, "index", str(docs), str(tmp_path / "missing")])
    assert res.exit_code == 3
    m = SUMMARY.search(res.stdout)
    assert m is not None and m.group(1) == "1", res.stdout
    assert f"failed: {tmp_path / 'missing'}: no such file or folder" in res.stderr
    js = CliRunner().invoke(cli, ["--kb", kb, "index", str(tmp_path / "gone"), "--json"])
    assert js.exit_code == 3 and '"failed": 1' in js.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["search"],  # click: missing argument
        ["--no-such-option"],
        ["serve", "--host", "0.0.0.0"],  # clawkb: a network bind without a token
        ["search", "x", "--limit", "many"],
    ],
)
def test_every_error_starts_with_lowercase_error(args: list[str], tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["--kb", str(tmp_path / "kb"), *args])
    assert res.exit_code == 2
    assert "Error:" not in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("error: "), res.stderr


def test_help_and_version_still_exit_0() -> None:
    assert CliRunner().invoke(cli, ["--help"]).exit_code == 0
    assert CliRunner().invoke(cli, ["--version"]).exit_code == 0


def test_http_argument_errors_are_one_line(tmp_path: Path) -> None:
    from server_helpers import serving, write_docs

    root = tmp_path / "docs"
    write_docs(root)
    with serving(tmp_path / "kb", [root]) as server:
        bad = [
            server.get("/api/v1/search"),
            server.get("/api/v1/search", params={"q": "x", "limit": "many"}),
            server.post("/api/v1/memory", json={"text": "x", "importance": 7}),
            server.post("/api/v1/ask", json={"question": 5, "limit": "x"}),
            server.post("/api/v1/index", json={}),
        ]
        for r in bad:
            body = r.json()
            assert r.status_code in (400, 422), (r.status_code, body)
            msg = body["message"]
            assert "\n" not in msg and "http" not in msg and "pydantic" not in msg, msg
            assert re.match(r"^[\w.]+: ", msg), msg  # names the field first
        assert bad[1].json()["message"].startswith("limit: ")


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_install_puts_clawkb_on_a_new_shells_path(tmp_path: Path) -> None:
    """`make install BINDIR=…` links the venv's script; a fresh shell with BINDIR on its
    PATH (and nothing else of ours) runs it. The venv is taken as built (-o)."""
    stamp = REPO / ".venv" / ".installed"
    if not (REPO / ".venv" / "bin" / "clawkb").exists():
        pytest.skip("no .venv in this checkout")
    bindir = tmp_path / "bin"
    make = ["make", "-s", "-C", str(REPO), "-o", str(stamp), f"BINDIR={bindir}"]
    out = subprocess.run([*make, "install"], capture_output=True, text=True, check=True).stdout
    assert f"installed: {bindir}/clawkb" in out
    assert f"note: {bindir} is not on your PATH" in out  # the test's PATH lacks it
    env = {"HOME": str(tmp_path), "PATH": f"{bindir}:/usr/bin:/bin"}
    shell = subprocess.run(
        ["bash", "--norc", "-c", "cd ~ && clawkb --help"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert shell.returncode == 0, shell.stderr
    assert "local-first bilingual knowledge base" in shell.stdout
    subprocess.run([*make, "uninstall"], capture_output=True, check=True)
    assert not os.path.lexists(bindir / "clawkb")


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_editors_skips_with_a_note_without_node(tmp_path: Path) -> None:
    """`make test` builds the editor packages; without node/npm it says so and goes on."""
    bare = tmp_path / "bin"  # a PATH with make and a shell, but no node or npm
    bare.mkdir()
    for tool in ("make", "sh", "bash", "id"):
        found = shutil.which(tool)
        if found:
            (bare / tool).symlink_to(found)
    stamp = REPO / ".venv" / ".installed"
    res = subprocess.run(
        [str(bare / "make"), "-s", "-C", str(REPO), "-o", str(stamp), "editors"],
        capture_output=True,
        text=True,
        env={"PATH": str(bare), "HOME": str(tmp_path)},
    )
    assert res.returncode == 0, res.stderr
    assert "note: node/npm not found; skipping the editor packages" in res.stderr
