"""The bundled examples pass their own golden set through the real CLI (`clawkb check`)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from clawkb.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]


def test_examples_golden_hit_at_3(tmp_path: Path) -> None:
    kb = str(tmp_path / "kb")
    runner = CliRunner()
    res = runner.invoke(cli, ["--kb", kb, "index", str(ROOT / "examples" / "notes")])
    assert res.exit_code == 0, res.output
    assert "failed 0" in res.output
    res = runner.invoke(
        cli, ["--kb", kb, "check", str(ROOT / "examples" / "golden.yaml"), "--json"]
    )
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert report["hit_at_k"] >= 0.9
    assert report["total"] >= 30 and len(report["results"]) == report["total"]


def test_ignored_draft_is_not_indexed(tmp_path: Path) -> None:
    kb = str(tmp_path / "kb")
    runner = CliRunner()
    runner.invoke(cli, ["--kb", kb, "index", str(ROOT / "examples" / "notes")])
    res = runner.invoke(cli, ["--kb", kb, "search", "ZZIGNOREDZZ"])
    assert res.exit_code == 1
    assert "no match" in res.output
