"""`clawkb skill install` writes the shipped SKILL.md where each agent looks for skills."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from clawkb.cli.main import cli
from clawkb.cli.skill import shipped


def _front_matter(text: str) -> dict[str, str]:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n", 2)[1])


def test_skill_has_front_matter_and_the_commands_it_names_exist() -> None:
    text = shipped("SKILL.md")
    meta = _front_matter(text)
    assert meta["name"] == "clawkb" and len(meta["description"]) > 40
    runner = CliRunner()
    for command in ("search", "show", "ask", "context", "pins", "status"):
        assert f"clawkb {command}" in text
        assert runner.invoke(cli, [command, "--help"]).exit_code == 0, command
    assert "cite" in text.lower() and "path:line" in text


@pytest.mark.parametrize(
    ("agent", "where"),
    [
        ("claude", ".claude/skills/clawkb/SKILL.md"),
        ("codex", ".codex/skills/clawkb/SKILL.md"),
        ("hermes", ".hermes/skills/clawkb/SKILL.md"),
    ],
)
def test_install_default_folder_per_agent(tmp_path: Path, agent: str, where: str) -> None:
    res = CliRunner().invoke(
        cli, ["skill", "install", "--agent", agent], env={"HOME": str(tmp_path)}
    )
    assert res.exit_code == 0, res.output
    target = tmp_path / where
    assert target.read_text(encoding="utf-8") == shipped("SKILL.md")
    assert str(target) in res.output


def test_install_dest_override_and_no_silent_overwrite(tmp_path: Path) -> None:
    runner = CliRunner()
    dest = tmp_path / "skills" / "kb"
    assert (
        runner.invoke(cli, ["skill", "install", "--agent", "claude", "--dest", str(dest)]).exit_code
        == 0
    )
    target = dest / "SKILL.md"
    assert target.is_file()
    target.write_text("my own edits\n", encoding="utf-8")
    res = runner.invoke(cli, ["skill", "install", "--agent", "claude", "--dest", str(dest)])
    assert res.exit_code == 2 and "exists and differs" in res.output
    assert target.read_text(encoding="utf-8") == "my own edits\n"
    res = runner.invoke(
        cli, ["skill", "install", "--agent", "claude", "--dest", str(dest), "--force"]
    )
    assert res.exit_code == 0 and target.read_text(encoding="utf-8") == shipped("SKILL.md")


def test_agents_md_snippet() -> None:
    res = CliRunner().invoke(cli, ["skill", "show", "--agents-md"])
    assert (
        res.exit_code == 0 and "clawkb search" in res.output and "## Knowledge base" in res.output
    )


def test_docs_carry_the_same_agents_md_snippet() -> None:
    docs = (Path(__file__).parents[1] / "docs" / "mcp.md").read_text(encoding="utf-8")
    assert shipped("AGENTS.md").strip() in docs
    for agent in ("claude", "codex", "hermes"):
        assert f"clawkb skill install --agent {agent}" in docs
    assert "[mcp_servers.clawkb]" in docs and ".cursor/mcp.json" in docs
