"""Confinement: nothing outside the indexed roots is read, nothing outside its folder written.

Symlinks that leave a root are skipped (and reported) unless the user opts in;
board, alias and namespace names cannot steer a write out of its folder; an
unreadable folder is one error line, never the end of the run.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawkb.cli.main import cli
from clawkb.errors import ConfigError
from clawkb.hardware import index_datasheets, set_pin
from clawkb.kb import KnowledgeBase


def _found(kb: KnowledgeBase, word: str) -> list[str]:
    return [h.anchor.path for h in kb.search(word).hits]


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """``docs/`` with one note, links leading out of it, and a secret outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("the passphrase is outsidesecretword\n")
    (outside / "sub").mkdir()
    (outside / "sub" / "more.md").write_text("more outsidefolderword here\n")
    docs = tmp_path / "docs"
    (docs / "inner").mkdir(parents=True)
    (docs / "note.md").write_text("an ordinary insidenoteword note\n")
    (docs / "inner" / "deep.md").write_text("deep innerdeepword text\n")
    (docs / "leak.md").symlink_to(outside / "secret.md")
    (docs / "leakdir").symlink_to(outside / "sub")
    (docs / "absolute.md").symlink_to("/etc/hostname")
    (docs / "alias.md").symlink_to(docs / "inner" / "deep.md")  # stays inside: followed
    (docs / "innerlink").symlink_to("inner")
    return docs


def test_symlinks_leaving_the_root_are_skipped_and_reported(tmp_path: Path, tree: Path) -> None:
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        report = kb.index([tree])
        assert _found(kb, "outsidesecretword") == []
        assert _found(kb, "outsidefolderword") == []
        paths = {p for p, _ in report.skipped_files}
        for name in ("leak.md", "leakdir", "absolute.md"):
            assert (tree / name).as_posix() in paths, report.skipped_files
        reasons = dict(report.skipped_files)
        assert "outside the indexed folder" in reasons[(tree / "leak.md").as_posix()]
        assert "follow_symlinks: outside" in reasons[(tree / "leak.md").as_posix()]
        assert not report.errors
        # links that stay inside the root are followed
        assert (tree / "alias.md").as_posix() in _found(kb, "innerdeepword")
        assert "outside" not in reasons.get((tree / "innerlink").as_posix(), "")
        indexed = {r[0] for r in kb.conn.execute("SELECT path FROM documents")}
        assert not any(os.path.realpath(p).startswith(str(tmp_path / "outside")) for p in indexed)


def test_follow_symlinks_outside_is_an_opt_in(tmp_path: Path, tree: Path) -> None:
    home = tmp_path / "kb"
    home.mkdir()
    (home / "config.yaml").write_text("follow_symlinks: outside\n")
    with KnowledgeBase.open(home, create=True) as kb:
        report = kb.index([tree])
        assert _found(kb, "outsidesecretword") == [(tree / "leak.md").as_posix()]
        assert _found(kb, "outsidefolderword") == [(tree / "leakdir" / "more.md").as_posix()]
        assert not any("outside" in r for _, r in report.skipped_files)


def test_follow_symlinks_never_and_bad_values(tmp_path: Path, tree: Path) -> None:
    home = tmp_path / "kb"
    home.mkdir()
    (home / "config.yaml").write_text("follow_symlinks: never\n")
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([tree])
        assert _found(kb, "innerdeepword") == [(tree / "inner" / "deep.md").as_posix()]
    (home / "config.yaml").write_text("follow_symlinks: sometimes\n")
    res = CliRunner().invoke(cli, ["--kb", str(home), "index", str(tree)])
    assert res.exit_code == 2
    assert "'follow_symlinks': Input should be 'inside', 'outside' or 'never'" in res.output
    assert "sometimes" in res.output and "config.yaml" in res.output


def test_a_link_indexed_before_is_removed_once_confined(tmp_path: Path, tree: Path) -> None:
    home = tmp_path / "kb"
    home.mkdir()
    (home / "config.yaml").write_text("follow_symlinks: outside\n")
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([tree])
        assert _found(kb, "outsidesecretword")
    (home / "config.yaml").write_text("")
    with KnowledgeBase.open(home) as kb:
        report = kb.index([tree])
        assert report.removed == 3  # leak.md, leakdir/more.md, absolute.md
        assert _found(kb, "outsidesecretword") == []


# -- writes: pins set ---------------------------------------------------------------


@pytest.fixture()
def ds_kb(tmp_path: Path) -> Iterator[tuple[KnowledgeBase, Path]]:
    ds = tmp_path / "lab" / "datasheets"
    ds.mkdir(parents=True)
    (ds / "uno.md").write_text("# Uno\n\n## Pin Aliases\nred_led: 9\n")
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        index_datasheets(kb, [], [ds])
        yield kb, ds


HOSTILE_BOARDS = [
    "../victim",
    "../../x",
    "{tmp}/absolute-board",
    "sub/dir",
    "..",
    ".hidden",
    "a" * 300,
    "x\x00y",
    "esc\x1b]52;c;aGk=\x07",
]


@pytest.mark.parametrize("board", HOSTILE_BOARDS)
def test_pins_set_refuses_board_names_that_leave_the_folder(
    ds_kb: tuple[KnowledgeBase, Path], board: str
) -> None:
    kb, ds = ds_kb
    lab = ds.parent
    board = board.replace("{tmp}", lab.parent.as_posix())
    before = sorted(p.as_posix() for p in lab.parent.rglob("*"))
    res = CliRunner().invoke(cli, ["--kb", str(kb.home), "pins", "set", board, "led", "13"])
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: board "), res.output
    assert "letters, digits" in lines[0] and len(lines[0]) < 200
    assert sorted(p.as_posix() for p in lab.parent.rglob("*")) == before


def test_pins_set_refuses_bad_aliases(ds_kb: tuple[KnowledgeBase, Path]) -> None:
    kb, ds = ds_kb
    for alias in ("b" * 65, "led|x", "tab\x1bled"):
        with pytest.raises(ConfigError, match="alias"):
            set_pin(kb, "uno", alias, "13")
    assert set_pin(kb, "uno", "Blue LED", "5").path == (ds / "uno.md").as_posix()


def test_pins_set_never_writes_through_a_link_out_of_the_folder(
    ds_kb: tuple[KnowledgeBase, Path], tmp_path: Path
) -> None:
    kb, ds = ds_kb
    victim = tmp_path / "victim.md"
    victim.write_text("# not a datasheet\n")
    (ds / "mega.md").symlink_to(victim)  # a planted link named like the board's file
    with pytest.raises(ConfigError, match="outside the datasheet folders"):
        set_pin(kb, "mega", "led", "13")
    assert victim.read_text() == "# not a datasheet\n"


def test_memory_namespaces_are_validated(tmp_path: Path) -> None:
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        for ns in ("../x", "/abs", "a/b", "n" * 300, ".."):
            with pytest.raises(ConfigError, match="namespace"):
                kb.memory.store("hello", namespace=ns)


# -- one unreadable folder is one error line --------------------------------------


def _without_file_permission_override() -> None:
    """As root, drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH before exec (prctl
    PR_CAPBSET_DROP), so file modes are enforced for the child as for any user."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _run_enforcing_permissions(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clawkb.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_without_file_permission_override if os.geteuid() == 0 else None,
    )


def test_an_unreadable_folder_is_one_error_line(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    for sub in ("good", "locked", "private"):
        (docs / sub).mkdir(parents=True)
    (docs / "good" / "fine.md").write_text("a readable finewordmarker\n")
    (docs / "top.md").write_text("top level topwordmarker\n")
    (docs / "locked" / "inside.md").write_text("lockedwordmarker\n")
    (docs / "private" / "note.md").write_text("privatewordmarker\n")
    (docs / "private" / ".gitignore").write_text("*.tmp\n")
    kb = tmp_path / "kb"
    first = _run_enforcing_permissions("--kb", str(kb), "index", str(docs))
    assert first.returncode == 0, first.stderr
    # now one folder cannot be listed, another one's ignore file cannot be read
    (docs / "locked").chmod(0o000)
    (docs / "private" / ".gitignore").chmod(0o000)
    (docs / "good" / "new.md").write_text("added later newwordmarker\n")
    try:
        res = _run_enforcing_permissions("--kb", str(kb), "index", str(docs))
    finally:
        (docs / "locked").chmod(0o755)
        (docs / "private" / ".gitignore").chmod(0o644)
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode == 3, res.stderr  # done, with failures
    failed = [line for line in res.stderr.splitlines() if line.startswith("failed: ")]
    assert len(failed) == 2, res.stderr
    assert any(
        (docs / "locked").as_posix() in line and "cannot read folder" in line for line in failed
    )
    assert any(".gitignore" in line and "Permission denied" in line for line in failed)
    assert "added 1" in res.stdout and "removed 0" in res.stdout
    with KnowledgeBase.open(kb) as opened:
        assert _found(opened, "newwordmarker")
        # what the unreadable folders held before is kept, not deleted
        assert _found(opened, "lockedwordmarker")
        assert _found(opened, "privatewordmarker")
