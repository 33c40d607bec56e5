"""Watch: real files created, edited, renamed, moved out, deleted; the API shows each change.

Runs `clawkb serve --watch` (and `clawkb watch`) as users do and polls with
bounded timeouts until the index reflects the file system.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("watchfiles", reason="needs the server extra: pip install 'clawkb[server]'")

from server_helpers import CLAWKB, Server, poll, serving, write_docs


@pytest.fixture()
def watched(tmp_path: Path) -> Iterator[tuple[Server, Path, Path]]:
    root = tmp_path / "notes"
    write_docs(root)
    (root / ".clawkbignore").write_text("private/\n", encoding="utf-8")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    with serving(tmp_path / "kb", [root], args=["--watch"]) as s:
        yield s, root, outside


def paths_for(s: Server, q: str) -> set[str]:
    r = s.ok("GET", "/api/v1/search", params={"q": q, "limit": 20})
    return {h["path"] for h in r["hits"]}


def visible(s: Server, q: str, path: Path) -> bool:
    return path.as_posix() in paths_for(s, q)


def shows(s: Server, q: str, path: Path, text: str) -> bool:
    """A hit of ``path`` whose text has ``text`` (a term's parts alone can match old text)."""
    r = s.ok("GET", "/api/v1/search", params={"q": q, "limit": 20})
    return any(h["path"] == path.as_posix() and text in h["text"] for h in r["hits"])


def gone(s: Server, q: str) -> bool:
    return not paths_for(s, q)


def test_create_edit_rename_move_delete(watched: tuple[Server, Path, Path]) -> None:
    s, root, outside = watched
    f = root / "sub" / "relay.md"
    f.parent.mkdir()
    f.write_text("# Relay\n\nRelay K7 drives the zeppelin pump.\n", encoding="utf-8")
    poll(lambda: visible(s, "zeppelin pump", f))

    f.write_text("# Relay\n\nRelay K7 now drives the quokka valve.\n", encoding="utf-8")
    poll(lambda: visible(s, "quokka valve", f) and gone(s, "zeppelin"))

    moved = root / "sub" / "relay-k7.md"
    f.rename(moved)
    poll(lambda: paths_for(s, "quokka valve") == {moved.as_posix()})

    shutil.move(str(moved), str(outside / "relay-k7.md"))  # moved out of the root
    poll(lambda: gone(s, "quokka valve"))

    (root / "uart.md").unlink()
    poll(lambda: gone(s, "UART3 40-pin header"))
    state = s.ok("GET", "/api/v1/status")["server"]["watch"]
    assert state["watching"] and state["runs"] >= 1 and state["last_error"] is None
    metrics = s.get("/metrics").text
    lag = re.search(r"^clawkb_watch_lag_seconds_count ([0-9.]+)", metrics, re.M)
    assert lag and 1 <= float(lag.group(1)) <= state["runs"]
    assert re.search(r'^clawkb_index_runs_total\{trigger="watch"\} [1-9]', metrics, re.M)
    assert "clawkb_watch_queue_depth 0.0" in metrics


def test_swap_temp_and_ignored_files_are_skipped(watched: tuple[Server, Path, Path]) -> None:
    s, root, _ = watched
    (root / ".ddr.md.swp").write_text("narwhal swapfile", encoding="utf-8")
    (root / "ddr.md~").write_text("narwhal backup", encoding="utf-8")
    (root / "private").mkdir()
    (root / "private" / "diary.md").write_text("# Diary\n\nnarwhal secrets\n", encoding="utf-8")
    marker = root / "marker.md"
    marker.write_text("# Marker\n\nA pangolin marker file.\n", encoding="utf-8")
    poll(lambda: visible(s, "pangolin marker", marker))  # a run happened after the others
    assert gone(s, "narwhal")


def test_deleted_and_recreated_folder(watched: tuple[Server, Path, Path]) -> None:
    s, root, _ = watched
    folder = root / "layout"
    poll(lambda: visible(s, "DQ DQS 等长", folder / "ddr.md"), timeout=5)
    shutil.rmtree(folder)
    poll(lambda: gone(s, "DQ DQS 等长"))
    folder.mkdir()
    (folder / "ddr.md").write_text("# DDR\n\nDQ DQS 等长 ±3 mil (new rule).\n", encoding="utf-8")
    (folder / "nested").mkdir()
    (folder / "nested" / "clock.md").write_text(
        "# Clock\n\nThe ocelot oscillator.\n", encoding="utf-8"
    )
    poll(lambda: visible(s, "DQ DQS 等长", folder / "ddr.md"))
    poll(lambda: visible(s, "ocelot oscillator", folder / "nested" / "clock.md"))


def test_many_changes_coalesce_and_cli_index_interleaves(
    watched: tuple[Server, Path, Path], tmp_path: Path
) -> None:
    s, root, _ = watched
    before = s.ok("GET", "/api/v1/status")["documents"]
    bulk = root / "bulk"
    bulk.mkdir()
    for i in range(150):
        (bulk / f"note{i:03d}.md").write_text(
            f"# Note {i}\n\nwombat item{i:03d}\n", encoding="utf-8"
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWKB_")}
    cli = subprocess.run(
        [CLAWKB, "--kb", str(tmp_path / "kb"), "index", str(root)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    for i in range(0, 150, 7):
        (bulk / f"note{i:03d}.md").write_text(
            f"# Note {i}\n\nwombat edited{i:03d}\n", encoding="utf-8"
        )
    poll(lambda: shows(s, "edited147", bulk / "note147.md", "edited147"), timeout=30)
    poll(lambda: shows(s, "item149", bulk / "note149.md", "item149"), timeout=30)
    hits = s.ok("GET", "/api/v1/search", params={"q": "item147", "limit": 50})["hits"]
    assert not [h for h in hits if "item147" in h["text"]]  # the old text is gone
    state = s.ok("GET", "/api/v1/status")
    assert state["documents"] == before + 150
    assert state["runs"][0]["status"] == "done"
    # 150 creations + 22 edits + a CLI run: coalesced into a few runs, not one per event
    assert state["server"]["watch"]["runs"] < 40


def test_watch_command(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    write_docs(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWKB_")}
    home = tmp_path / "kb"
    proc = subprocess.Popen(
        [CLAWKB, "--kb", str(home), "watch", str(root), "--debounce", "100"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("indexed: added 3")
        assert proc.stdout.readline().startswith("watching")
        time.sleep(0.3)
        (root / "new.md").write_text("# New\n\nThe axolotl sensor.\n", encoding="utf-8")
        line = proc.stdout.readline()
        assert "+1" in line, line

        def found() -> bool:
            out = subprocess.run(
                [CLAWKB, "--kb", str(home), "search", "axolotl", "--json"],
                capture_output=True, text=True, env=env,
            )  # fmt: skip
            return '"count": 1' in out.stdout

        poll(found, timeout=20, every=0.3)
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        if proc.stdout:
            proc.stdout.close()


def test_new_chunks_are_embedded_in_the_background(tmp_path: Path) -> None:
    pytest.importorskip("static_model", reason="needs the dense extra (tokenlearn-static-model)")
    from clawkb import KnowledgeBase
    from clawkb.embed.base import get_embedder
    from clawkb.embed.run import embed_kb

    root = tmp_path / "notes"
    write_docs(root)
    home = tmp_path / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([root])
    (home / "config.yaml").write_text("embedding:\n  model: static\n", encoding="utf-8")
    with KnowledgeBase.open(home) as kb:
        embed_kb(kb, embedder=get_embedder("static"))
    with serving(home, [root], args=["--watch"]) as s:
        dense = s.ok("GET", "/api/v1/status")["dense"]
        assert dense["vectors"] == dense["chunks"] > 0
        (root / "more.md").write_text("# More\n\n## A\n\nThe gecko relay.\n\n## B\n\nIt clicks.\n")

        def embedded() -> bool:
            st = s.ok("GET", "/api/v1/status")
            return bool(st["documents"] == 4 and st["dense"]["vectors"] == st["dense"]["chunks"])

        poll(embedded, timeout=30)
        assert s.ok("GET", "/api/v1/status")["dense"]["chunks"] > dense["chunks"]
