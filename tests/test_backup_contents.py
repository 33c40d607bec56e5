"""A backup carries everything that is the KB, and a restore elsewhere points at itself.

The agents' learned notes (and pending/rejected ones), the KB's roles, its
config.yaml and synonym file survive backup → restore into another folder
with the original KB deleted; search, ``learned list`` and the web viewer then
all name the restored KB's own files.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from clawkb import KnowledgeBase
from clawkb.knowledge.writeback import learn
from clawkb.maintenance.backup import backup, restore
from kb_helpers import UART_DOC, write_docs
from server_helpers import CLAWKB

NOTE = "The kestrel bootloader must be flashed at offset 0x8000 before the partition table."
ROLE = """name: reviewer
description: Reviews a design against the passages.
system: |
  Review using only the passages. Cite as [n].
user: |
  {{ context }}

  Question: {{ question }}
"""


@pytest.fixture
def restored(tmp_path: Path) -> tuple[Path, Path]:
    docs = write_docs(tmp_path, UART_DOC)
    old = tmp_path / "old-kb"
    old.mkdir()
    (old / "config.yaml").write_text("retrieval:\n  cache_size: 64\n")
    (old / "synonyms.txt").write_text("kestrel = falcon\n")
    (old / "roles").mkdir()
    (old / "roles" / "reviewer.yaml").write_text(ROLE)
    with KnowledgeBase.open(old, create=True) as kb:
        kb.index([docs])
        learn(kb, NOTE, title="Kestrel flash offset", domain="firmware", agent="t")
        backup(kb, tmp_path / "backup")
    shutil.rmtree(old)  # the restore must not lean on the original folder
    new = tmp_path / "new-kb"
    restore(new, tmp_path / "backup")
    return new, docs


def test_backup_restores_learned_roles_config_and_synonyms(restored: tuple[Path, Path]) -> None:
    new, _ = restored
    assert (new / "config.yaml").read_text() == "retrieval:\n  cache_size: 64\n"
    assert (new / "synonyms.txt").read_text() == "kestrel = falcon\n"
    assert (new / "roles" / "reviewer.yaml").read_text() == ROLE
    notes = list((new / "learned").glob("*/*.md"))
    assert len(notes) == 1 and NOTE in notes[0].read_text()

    listed = subprocess.run(
        [CLAWKB, "--kb", str(new), "learned", "list"], capture_output=True, text=True, check=True
    ).stdout
    assert "Kestrel flash offset" in listed, listed

    with KnowledgeBase.open(new) as kb:
        hits = kb.search("kestrel bootloader offset").hits
        assert hits and hits[0].anchor.path == notes[0].resolve().as_posix(), [
            h.anchor.path for h in hits
        ]
        # Nothing still names the deleted KB folder.
        paths = [r[0] for r in kb.conn.execute("SELECT path FROM documents")]
        assert not [p for p in paths if "/old-kb/" in p], paths
        # The synonym file works in the restored KB: "falcon" finds the kestrel note.
        assert kb.search("falcon bootloader").hits


def test_viewer_serves_the_kbs_own_learned_notes(restored: tuple[Path, Path]) -> None:
    pytest.importorskip("fastapi", reason="needs the server extra")
    from server_helpers import serving

    new, docs = restored
    with KnowledgeBase.open(new) as kb:
        anchor = kb.search("kestrel bootloader offset").hits[0].anchor.id
    with serving(new, [docs], args=["--no-mcp"]) as s:
        view = s.ok("GET", f"/api/v1/source/{anchor}")
        assert any("0x8000" in line["text"] for line in view["lines"]), view
        # Other files of the KB folder stay out of reach.
        assert s.post("/api/v1/index", json={"path": str(new / "config.yaml")}).status_code == 403


def test_a_crafted_backup_info_cannot_touch_the_store_or_leave_the_kb(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nThe ibis relay is K7.\n")
    home = tmp_path / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([docs])
        backup(kb, tmp_path / "backup")
    info_path = tmp_path / "backup" / "BACKUP.json"
    info = json.loads(info_path.read_text())
    info["files"] = [
        ".",
        "",
        "index",
        "clawkb.sqlite",
        "../outside.txt",
        "/etc/passwd",
        "write.lock",
    ]
    info_path.write_text(json.dumps(info))
    (tmp_path / "outside.txt").write_text("keep me")
    (tmp_path / "backup" / "index" / "stray.txt").write_text("x")
    restore(home, tmp_path / "backup")
    assert (tmp_path / "outside.txt").read_text() == "keep me"
    with KnowledgeBase.open(home) as kb:
        assert kb.search("ibis relay").hits
