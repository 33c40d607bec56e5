"""Where the KB goes with no .clawkb around: ./.clawkb, announced; never a hidden folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clawkb.config import find_home
from plugin_helpers import clawkb


@pytest.fixture()
def bare(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    if find_home(tmp_path) is not None:
        pytest.skip(f"a .clawkb folder above {tmp_path} would be found first")
    env = {k: v for k, v in os.environ.items() if k != "CLAWKB_HOME"}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")  # where the old fallback would have written
    work = tmp_path / "project"
    (work / "notes").mkdir(parents=True)
    (work / "notes" / "a.md").write_text("# Boot\n\nThe board boots from SPI flash.\n")
    return work, env


def test_index_creates_dot_clawkb_here_and_says_so(bare: tuple[Path, dict[str, str]]) -> None:
    work, env = bare
    res = clawkb(env, "index", "notes", cwd=work)
    assert res.returncode == 0, res.stderr
    assert f"knowledge base: {work / '.clawkb'}" in res.stderr.splitlines()
    assert (work / ".clawkb" / "clawkb.sqlite").is_file()
    assert not (work.parent / "xdg").exists()
    # a later command from a subfolder finds the same KB
    found = clawkb(env, "search", "SPI flash", cwd=work / "notes")
    assert found.returncode == 0 and "a.md" in found.stdout


def test_every_write_command_names_its_kb(bare: tuple[Path, dict[str, str]]) -> None:
    work, env = bare
    kb = work / ".clawkb"
    line = f"knowledge base: {kb}"
    assert line in clawkb(env, "index", "notes", cwd=work).stderr
    assert line in clawkb(env, "memory", "store", "boot pin is GPIO0", cwd=work).stderr
    assert line in clawkb(env, "reindex", cwd=work).stderr
    assert line in clawkb(env, "memory", "forget", "--query", "boot", cwd=work).stderr
    (work / "ds").mkdir()
    (work / "ds" / "uno.md").write_text("# Uno\n\n## Pin Aliases\nred_led: 9\n")
    assert line in clawkb(env, "index", "--datasheets", "ds", cwd=work).stderr
    pins = clawkb(env, "pins", "set", "uno", "red_led", "10", cwd=work)
    assert pins.returncode == 0 and line in pins.stderr, pins.stderr
    # reads stay quiet about it
    assert "knowledge base:" not in clawkb(env, "search", "boot", cwd=work).stderr


def test_read_with_no_kb_is_a_clear_error(bare: tuple[Path, dict[str, str]]) -> None:
    work, env = bare
    res = clawkb(env, "search", "anything", cwd=work)
    assert res.returncode == 2
    assert res.stderr.strip() == (
        f"error: no knowledge base at {work / '.clawkb'} (run `clawkb init` or `clawkb index PATH`)"
    )
    assert not (work / ".clawkb").exists()


def test_json_output_stays_one_document(bare: tuple[Path, dict[str, str]]) -> None:
    import json

    work, env = bare
    res = clawkb(env, "index", "notes", "--json", cwd=work)
    assert res.returncode == 0 and "knowledge base:" not in res.stderr
    assert json.loads(res.stdout)["added"] == 1
    res = clawkb(env, "memory", "store", "--json", "boot from SPI", cwd=work)
    assert res.returncode == 0 and json.loads(res.stdout)["created"]
    assert "knowledge base:" not in res.stderr
