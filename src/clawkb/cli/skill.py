"""`clawkb skill`: install the shipped agent skill (SKILL.md) or print the AGENTS.md snippet.

Default destinations (``--dest`` overrides; ``~`` is the user's home):

=========  ==========================================
agent      file written
=========  ==========================================
claude     ``~/.claude/skills/clawkb/SKILL.md``
codex      ``~/.codex/skills/clawkb/SKILL.md``
hermes     ``~/.hermes/skills/clawkb/SKILL.md``
=========  ==========================================
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import click

from clawkb.cli.common import echo, handle_errors
from clawkb.errors import ClawkbError

AGENT_DIRS = {
    "claude": "~/.claude/skills/clawkb",
    "codex": "~/.codex/skills/clawkb",
    "hermes": "~/.hermes/skills/clawkb",
}


def shipped(name: str) -> str:
    """The text of a file shipped in ``clawkb/agent`` (``SKILL.md``, ``AGENTS.md``)."""
    return files("clawkb.agent").joinpath(name).read_text(encoding="utf-8")


def skill_path(agent: str, dest: str | None) -> Path:
    """Where the skill goes: ``dest`` (a folder or a ``.md`` file) or the agent's default."""
    if dest:
        target = Path(dest).expanduser()
        return target if target.suffix.lower() == ".md" else target / "SKILL.md"
    return Path(AGENT_DIRS[agent]).expanduser() / "SKILL.md"


@click.group()
def skill() -> None:
    """Agent setup: install SKILL.md for Claude Code, Codex or Hermes."""


@skill.command("install")
@click.option("--agent", type=click.Choice(sorted(AGENT_DIRS)), required=True)
@click.option("--dest", metavar="PATH", help="Folder (or .md file) to write instead.")
@click.option("--force", is_flag=True, help="Replace a SKILL.md that differs from this one.")
@handle_errors
def install(agent: str, dest: str | None, force: bool) -> None:
    """Write clawkb's SKILL.md to the agent's skills folder."""
    path = skill_path(agent, dest)
    text = shipped("SKILL.md")
    if path.exists() and path.read_text(encoding="utf-8", errors="replace") != text and not force:
        raise ClawkbError(f"{path} exists and differs from clawkb's skill; use --force to replace")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ClawkbError(f"cannot write {path}: {exc.strerror or exc}") from None
    echo(f"installed the clawkb skill for {agent}: {path}")


@skill.command("show")
@click.option("--agents-md", is_flag=True, help="Print the AGENTS.md snippet instead.")
def show(agents_md: bool) -> None:
    """Print the shipped SKILL.md (or the AGENTS.md snippet)."""
    echo(shipped("AGENTS.md" if agents_md else "SKILL.md"), nl=False)
