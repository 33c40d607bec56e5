"""Features plug in through one registry (``clawkb.plugins``): a third-party
distribution's query stage, rank stage, CLI command, ingest hook and doctor check run
exactly like the built-ins (boards, knowledge, exact, headings, every command, the sandbox check),
and the in-process API registers the same kinds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from clawkb import KnowledgeBase, plugins
from clawkb.cli.main import cli
from clawkb.retrieve.fusion import Fused
from clawkb.retrieve.stages import RankContext
from plugin_helpers import clawkb, install_dist

EXTRA = '''"""A third-party clawkb plugin: one of each kind."""
import dataclasses

import click

from clawkb.maintenance.doctor import Finding
from clawkb.retrieve.options import Option


@click.command()
@click.argument("name")
def hello(name):
    """Say hello (a plugin command)."""
    click.echo(f"hello {name} from a plugin")


class StampStage:
    """Around the pipeline: adds a warning naming its option's value."""

    order = 30
    options = (Option("stamp", str, "Put this word into the warnings (a plugin option)."),)

    @staticmethod
    def search_kwargs(params):
        value = params.pop("stamp", None)
        return {"features": {"stamp": value}} if value else {}

    @staticmethod
    def around(kb, q, run):
        res = run(q)
        if q.features.get("stamp"):
            res.warnings.append("stamped " + q.features["stamp"])
        return res


class LastFirst:
    """Over the fused list: the last candidate goes first, for queries naming "flip"."""

    order = 90
    needs = frozenset()

    @staticmethod
    def wanted(ctx):
        return "flip" in ctx.q.text

    @staticmethod
    def apply(ctx, fused):
        if len(fused) < 2:
            return fused, None
        top = max(f.score for f in fused)
        last = dataclasses.replace(fused[-1], score=top + 1.0)
        return [last, *fused[:-1]], {"moved": last.chunk_id}


class Recorder:
    """An ingest hook: notes every stored file's path in the KB folder."""

    order = 60

    def __init__(self, log):
        self.log = log

    @classmethod
    def for_kb(cls, kb):
        return cls(str(kb.home / "recorded.txt"))

    def chunk_config(self, path, parsed, config):
        return config

    def stored(self, repo, doc_id, path, parsed):
        with open(self.log, "a", encoding="utf-8") as fh:
            fh.write(path.rsplit("/", 1)[-1] + "\\n")


def check(kb):
    return Finding("extra check", True, f"{kb.repo.counts()['documents']} documents seen")
'''

ENTRY_POINTS = """[clawkb.commands]
hello = clawkbextra:hello
broken = clawkbmissing:command

[clawkb.query_stages]
stamp = clawkbextra:StampStage

[clawkb.rank_stages]
last-first = clawkbextra:LastFirst

[clawkb.doctor_checks]
extra = clawkbextra:check

[clawkb.ingest_hooks]
recorder = clawkbextra:Recorder
"""

DOCS = {
    "uart.md": "# UART\n\nThe debug console is UART2 at 115200 baud.\n",
    "flip.md": "# Flip\n\nflip the console to the other port when UART2 is busy.\n",
    "gpio.md": "# GPIO\n\nGPIO5 drives the status LED; flip it to test the console.\n",
}


@pytest.fixture
def extra_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The test distribution installed on a private path, visible to this process (its
    entry points read afresh) and to subprocesses (the returned environment)."""
    site = tmp_path / "site"
    env = install_dist(site, "clawkb_extra", "1.2", {"clawkbextra": EXTRA}, ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(site))
    _forget_plugins()
    try:
        yield env
    finally:
        cli.commands.pop("hello", None)
        cli.commands.pop("broken", None)
        monkeypatch.undo()
        _forget_plugins()


def _forget_plugins() -> None:
    """Read the entry points again, and rebuild ``search``: its flags come from the
    options table when its module is imported, and an earlier test in this process
    may have imported it before the test distribution was on the path."""
    import importlib

    import clawkb.cli.searching

    plugins.quick_entry_points.cache_clear()
    plugins.load_group.cache_clear()
    importlib.reload(clawkb.cli.searching)
    cli.commands.pop("search", None)


def test_a_third_party_distribution_adds_a_command_stages_and_a_doctor_check(
    tmp_path: Path, extra_dist: dict[str, str]
) -> None:
    from click.testing import CliRunner

    from clawkb.maintenance.doctor import run_doctor

    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    kb = str(tmp_path / "kb")
    runner = CliRunner()

    def run(*args: str) -> str:
        res = runner.invoke(cli, list(args), catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res.stdout

    mine = {(r["group"], r["name"]): r["origin"] for r in json.loads(run("plugins", "--json"))}
    for key in [("clawkb.commands", "hello"), ("clawkb.query_stages", "stamp"),
                ("clawkb.rank_stages", "last-first"), ("clawkb.doctor_checks", "extra"),
                ("clawkb.ingest_hooks", "recorder")]:  # fmt: skip
        assert mine[key] == "clawkb_extra 1.2", key
    for key in [("clawkb.commands", "search"), ("clawkb.query_stages", "knowledge"),
                ("clawkb.query_stages", "boards"), ("clawkb.rank_stages", "exact"),
                ("clawkb.rank_stages", "headings"), ("clawkb.ingest_hooks", "datasheets"),
                ("clawkb.doctor_checks", "sandbox")]:  # fmt: skip
        assert mine[key] == "built-in", key

    # a fresh process finds the plugin command at start-up
    res = clawkb(extra_dist, "hello", "world")
    assert res.returncode == 0 and res.stdout.strip() == "hello world from a plugin", res.stderr

    # a plugin command that cannot load: one line naming it; the rest still work
    broken = runner.invoke(cli, ["broken"])
    assert broken.exit_code == 1
    assert "command 'broken' (clawkbmissing:command) cannot be loaded" in broken.output
    assert "hello" in runner.invoke(cli, ["--help"]).stdout

    run("--kb", kb, "index", str(docs))
    recorded = (Path(kb) / "recorded.txt").read_text(encoding="utf-8").split()
    assert sorted(recorded) == sorted(DOCS)  # the plugin's ingest hook saw every file
    # the plugin's option is a `clawkb search` flag; its stage sees the value
    got = json.loads(run("--kb", kb, "search", "UART2 console", "--stamp", "teal", "--json"))
    assert "stamped teal" in got["warnings"]
    plain = json.loads(run("--kb", kb, "search", "UART2 console", "--json"))
    assert not any("stamped" in w for w in plain["warnings"])
    # the rank stage runs after the built-ins and says so in the fusion trace
    flip = json.loads(run("--kb", kb, "search", "flip console", "--explain", "--json"))
    fusion = next(s for s in flip["stages"] if s["stage"] == "fusion")
    assert "last-first {'moved':" in fusion["note"]

    report = run_doctor(Path(kb))
    findings = {f.check: f for f in report.findings}
    assert findings["extra check"].ok
    assert findings["extra check"].message == "3 documents seen"
    assert "parser sandbox" in findings


class Lift:
    """Puts one chunk id first; needs a capability the test chooses."""

    order = 95

    def __init__(self, needs: frozenset[str]) -> None:
        self.needs = needs
        self.ran = 0

    def wanted(self, ctx: RankContext) -> bool:
        return True

    def apply(self, ctx: RankContext, fused: list[Fused]) -> tuple[list[Fused], object]:
        self.ran += 1
        last = fused[-1]
        return [Fused(last.chunk_id, fused[0].score + 1, last.trace), *fused[:-1]], "lifted"


def test_registered_rank_stage_runs_only_where_the_source_can_serve_it(tmp_path: Path) -> None:
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        from clawkb.kb import TextRecord

        kb.index_texts([TextRecord(path=n, text=t) for n, t in DOCS.items()])
        base = kb.search("console", mode="lexical", limit=3)
        assert len(base.hits) == 3
        served, refused = Lift(frozenset({"restricted_lexical"})), Lift(frozenset({"telepathy"}))
        try:
            plugins.register("clawkb.rank_stages", "served", served)
            plugins.register("clawkb.rank_stages", "refused", refused)
            names = [p.name for p in plugins.list_plugins(("clawkb.rank_stages",))]
            assert {"served", "refused", "exact"} <= set(names)
            lifted = kb.search("console", mode="lexical", limit=3, explain=True)
        finally:
            plugins.unregister("clawkb.rank_stages", "served")
            plugins.unregister("clawkb.rank_stages", "refused")
        assert (served.ran, refused.ran) == (1, 0)
        assert lifted.hits[0].anchor.id == base.hits[-1].anchor.id
        note = next(s["note"] for s in lifted.stages if s["stage"] == "fusion")
        assert "served lifted" in note and "refused" not in note
        again = kb.search("console", mode="lexical", limit=3)
        assert [h.anchor.id for h in again.hits] == [h.anchor.id for h in base.hits]
        assert np.allclose([h.score for h in again.hits], [h.score for h in base.hits])
