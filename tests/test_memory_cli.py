"""`clawkb memory ...` and `clawkb search --include-memory` through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from clawkb.cli.main import cli


def run(home: Path, *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--kb", str(home), *args], input=stdin, catch_exceptions=False)


def test_memory_commands_round_trip(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    out = run(home, "memory", "store", "-N", "bringup", "-t", "uart", "--importance", "0.8",
              "--json", "UART2", "console", "is", "1500000", "baud")  # fmt: skip
    assert out.exit_code == 0, out.output
    stored = json.loads(out.output)
    assert stored["created"] and stored["namespace"] == "bringup" and stored["tags"] == ["uart"]

    again = run(home, "memory", "store", "-N", "bringup", "UART2 console is 1500000 baud")
    assert (
        again.exit_code == 0
        and f"updated (same text already stored) {stored['id']}" in again.output
    )

    piped = run(home, "memory", "store", "--ttl", "7d", "-", stdin="eMMC boot needs SARADC key\n")
    assert piped.exit_code == 0 and piped.output.startswith("stored ")

    recall = run(home, "memory", "recall", "--json", "-N", "bringup", "1500000")
    data = json.loads(recall.output)
    assert data["count"] == 1
    hit = data["hits"][0]
    assert hit["source"] == "memory" and hit["memory"]["id"] == stored["id"]
    assert hit["path"] == stored["path"] and hit["line_start"] == 1

    text = run(home, "memory", "recall", "--explain", "baud")
    assert (
        text.exit_code == 0
        and "importance 0.8" in text.output
        and "[memory] bringup" in text.output
    )

    listing = json.loads(run(home, "memory", "list", "--json").output)
    assert listing["namespaces"] == {"bringup": 1, "default": 1}
    assert {m["text"] for m in listing["memories"]} == {
        "UART2 console is 1500000 baud",
        "eMMC boot needs SARADC key",
    }
    expiring = next(m for m in listing["memories"] if m["namespace"] == "default")
    assert expiring["expires_at"] - expiring["updated_at"] == 7 * 86400

    assert run(home, "search", "1500000").exit_code == 1  # memory is not a document
    found = json.loads(run(home, "search", "--include-memory", "--json", "1500000").output)
    assert [h["path"] for h in found["hits"]] == [stored["path"]]

    dry = run(home, "memory", "forget", "--dry-run", "-t", "uart")
    assert dry.exit_code == 0 and "would forget 1 memory" in dry.output
    gone = json.loads(run(home, "memory", "forget", "--json", stored["id"][:8]).output)
    assert gone["count"] == 1 and not gone["dry_run"]
    assert run(home, "memory", "recall", "1500000").exit_code == 1


def test_memory_errors_are_one_line(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    bad = run(home, "memory", "store", "--importance", "2", "x")
    assert bad.exit_code == 2 and bad.output.strip().startswith("error: importance")
    bad_ttl = run(home, "memory", "store", "--ttl", "tomorrow", "x")
    assert bad_ttl.exit_code == 2 and "ttl 'tomorrow'" in bad_ttl.output
    nothing = run(home, "memory", "forget")
    assert nothing.exit_code == 2 and "at least one id, tag or query" in nothing.output
