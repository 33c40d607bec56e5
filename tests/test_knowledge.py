"""Trust tiers, domains, the link graph, write-back and the content health check,
on real knowledge bases in temporary folders (real parser, store and index)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawkb import KnowledgeBase
from clawkb.cli.main import cli
from clawkb.config import Config
from clawkb.errors import ConfigError
from clawkb.knowledge import at_least, tier_rank
from clawkb.knowledge.health import check_content
from clawkb.knowledge.links import Resolver, all_links
from clawkb.knowledge.similar import duplicate_pairs, jaccard, shingles
from clawkb.knowledge.writeback import approve, learn, notes, reject
from clawkb.retrieve.hits import hit_dict
from clawkb.text.records import table_records


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    write(
        docs / "manuals" / "ddr.md",
        "# DDR 布线规则\n\nDDR4 trace length matching tolerance is 5 mil.\n"
        "See [[Power rails]] and [timing](../forum/tips.md#ddr-timing).\n\n"
        "See also: Ghost note, Power rails\n",
    )
    write(
        docs / "forum" / "tips.md",
        "---\ndomain: ddr\n---\n# Tips\n\n## DDR timing\n\n"
        "Forum: the DDR4 trace length matching tolerance is 25 mil.\n"
        "Compare [the manual](../manuals/ddr.md#no-such-heading).\n",
    )
    write(
        docs / "power.md",
        "---\ntrust: official\n---\n# Power rails\n\nThe 3V3 rail feeds the SoC.\n",
    )
    write(docs / "lonely.md", "# Lonely\n\nNothing links here.\n")
    write(
        tmp_path / ".clawkb" / "config.yaml",
        'sources:\n  "manuals/*": official\n  "**/forum/*": community\n'
        "domains:\n  power: [power.md]\n",
    )
    return tmp_path


def open_kb(project: Path) -> KnowledgeBase:
    return KnowledgeBase.open(project / ".clawkb", create=True)


def tiers(kb: KnowledgeBase) -> dict[str, tuple[str | None, str | None]]:
    rows = kb.conn.execute("SELECT path, trust, domain FROM documents")
    return {Path(p).name: (t, d) for p, t, d in rows}


def test_tiers_and_domains_from_rules_front_matter_and_default(project: Path) -> None:
    with open_kb(project) as kb:
        kb.index([project / "docs"])
        assert tiers(kb) == {
            "ddr.md": ("official", None),
            "tips.md": ("community", "ddr"),
            "power.md": ("official", "power"),  # front matter trust, domain from a rule
            "lonely.md": ("team", None),  # knowledge.default_trust
        }
        hits = kb.search("DDR4 trace length tolerance", limit=5).hits
        got = {Path(h.anchor.path).name: (h.trust, h.domain) for h in hits}
        assert got["ddr.md"] == ("official", None) and got["tips.md"] == ("community", "ddr")
        as_json = hit_dict(hits[0])
        assert as_json["trust"] in ("official", "community") and "domain" in as_json
        kb.memory.store("The lab closes at 6pm.", namespace="ops")
        mem = kb.search("lab closes", include_memory=True, limit=3).hits
        assert mem[0].trust == "memory"


def test_changed_rules_reclassify_unchanged_files(project: Path) -> None:
    with open_kb(project) as kb:
        kb.index([project / "docs"])
    write(project / ".clawkb" / "config.yaml", 'sources:\n  "forum/*": team\n')
    with open_kb(project) as kb:
        kb.index([project / "docs"])  # nothing changed on disk
        assert tiers(kb)["tips.md"] == ("team", "ddr")
        assert tiers(kb)["ddr.md"] == ("team", None)


def test_datasheet_flag_makes_a_file_official(tmp_path: Path) -> None:
    write(tmp_path / "ds" / "board.md", "# Pins\n\n| Pin | Name |\n|---|---|\n| PA5 | LED |\n")
    write(
        tmp_path / ".clawkb" / "config.yaml",
        "datasheets: [ds]\nknowledge:\n  default_trust: community\n",
    )
    with KnowledgeBase.open(tmp_path / ".clawkb", create=True) as kb:
        kb.index([tmp_path / "ds"])
        assert tiers(kb)["board.md"][0] == "official"


def test_tier_order_and_config_validation() -> None:
    assert tier_rank("official") < tier_rank("team") < tier_rank("learned") < tier_rank(None)
    assert at_least("official", "team") and not at_least("community", "team")
    with pytest.raises(ConfigError, match="sources"):
        Config.from_dict({"sources": {"x/*": "gospel"}})
    with pytest.raises(ConfigError, match=r"knowledge\.writeback"):
        Config.from_dict({"knowledge": {"writeback": "sometimes"}})
    cfg = Config.from_dict(
        {"domains": {"ddr": ["hw/ddr/*"]}, "knowledge": {"writeback": "pending"}}
    )
    assert cfg.domains == {"ddr": ("hw/ddr/*",)} and cfg.knowledge.writeback == "pending"


def test_links_resolved_broken_and_updated_incrementally(project: Path) -> None:
    docs = project / "docs"
    with open_kb(project) as kb:
        kb.index([docs])
        rows = all_links(kb.conn)
        out = {(r.kind, Path(r.target).name, r.broken) for r in rows if r.source.endswith("ddr.md")}
        assert out == {
            ("wiki", "power.md", ""),
            ("markdown", "tips.md", ""),
            ("see_also", "ghost note", "missing note"),
            ("see_also", "power.md", ""),
        }
        broken = {(Path(r.source).name, r.broken) for r in rows if r.broken}
        assert ("tips.md", "missing heading") in broken
        # the link from tips.md names a heading that ddr.md does not have; add it
        write(
            docs / "forum" / "tips.md",
            (docs / "forum" / "tips.md").read_text().replace("#no-such-heading", "#ddr-布线规则"),
        )
        kb.index([docs])
        assert not any(r.broken for r in all_links(kb.conn) if r.source.endswith("tips.md"))
        (docs / "power.md").unlink()
        kb.index([docs])
        after = {(r.kind, r.target, r.broken) for r in all_links(kb.conn) if r.broken}
        assert ("wiki", "power rails", "missing note") in after
        res = Resolver(kb.conn)
        assert res.target("power rails") is None


def test_links_cli_and_json(project: Path) -> None:
    with open_kb(project) as kb:
        kb.index([project / "docs"])
    runner = CliRunner()
    home = str(project / ".clawkb")
    res = runner.invoke(cli, ["--kb", home, "links", str(project / "docs" / "power.md"), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["outgoing"] == [] and len(data["incoming"]) == 2
    res = runner.invoke(cli, ["--kb", home, "links", str(project / "docs" / "manuals" / "ddr.md")])
    assert "BROKEN: missing note" in res.output and "in (1):" in res.output
    res = runner.invoke(cli, ["--kb", home, "links", str(project / "nope.md")])
    assert res.exit_code == 2 and "not in the knowledge base" in res.output


def test_learn_dedup_history_and_survives_reindex_of_parent(project: Path) -> None:
    with open_kb(project) as kb:
        kb.index([project / "docs"])
        first = learn(
            kb,
            "DDR4 length matching passed at 5 mil on board rev B.",
            domain="ddr",
            agent="router-bot",
            task="route DDR",
            outcome="success",
            anchors=[kb.search("DDR4 tolerance").hits[0].anchor.id],
        )
        assert first.created and first.indexed
        path = first.note.path
        assert path.parent == project / ".clawkb" / "learned" / "ddr"
        text = path.read_text()
        assert (
            "agent: router-bot" in text and "task: route DDR" in text and "trust: learned" in text
        )
        top = kb.search("length matching rev B passed", limit=1).hits[0]
        assert top.anchor.path == path.as_posix() and top.trust == "learned"
        assert top.domain == "ddr"
        second = learn(
            kb,
            "DDR4 length matching passed at 5 mil on board rev B and rev C.",
            domain="ddr",
            agent="other-bot",
        )
        assert not second.created and second.note.path == path and second.similarity >= 0.7
        assert [h["agent"] for h in second.note.meta["history"]] == ["router-bot"]
        assert "rev C" in kb.search("length matching rev C", limit=1).hits[0].text
        different = learn(kb, "The 3V3 rail must come up before 1V8.", domain="power")
        assert different.created and len(notes(kb)) == 2
        kb.index([project])  # the KB folder is skipped by the walk; notes must survive
        assert kb.repo.document(path.as_posix()) is not None


def test_pending_approve_reject(project: Path) -> None:
    write(project / ".clawkb" / "config.yaml", "knowledge:\n  writeback: pending\n")
    with open_kb(project) as kb:
        res = learn(kb, "Use the blue jumper JP3 to enable JTAG on rev A.", domain="debug")
        assert res.note.status == "pending" and not res.indexed
        assert not kb.search("blue jumper JP3 JTAG").hits
        note = approve(kb, "debug/use-the-blue", reviewer="ana")
        assert note.meta["trust"] == "team" and note.meta["approved_by"] == "ana"
        hit = kb.search("blue jumper JP3 JTAG").hits[0]
        assert hit.trust == "team" and hit.anchor.path == note.path.as_posix()
        assert not list((project / ".clawkb" / "learned-pending").rglob("*.md"))
        gone = reject(kb, "debug/use-the-blue", reason="wrong board")
        assert gone.path.is_file() and "learned-rejected" in gone.path.as_posix()
        assert not kb.search("blue jumper JP3 JTAG").hits
        with pytest.raises(ConfigError, match="rejected"):
            approve(kb, gone.path.as_posix())


def test_learn_cli_round_trip(project: Path) -> None:
    runner = CliRunner()
    home = str(project / ".clawkb")
    res = runner.invoke(
        cli,
        [
            "--kb",
            home,
            "learn",
            "--domain",
            "ops",
            "--agent",
            "a1",
            "--json",
            "Restart",
            "the",
            "lab",
            "PDU",
            "via",
            "port",
            "8",
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["created"] and data["id"].startswith("ops/restart")
    res = runner.invoke(cli, ["--kb", home, "learned", "list"])
    assert "ops/restart" in res.output and "active" in res.output
    res = runner.invoke(cli, ["--kb", home, "learned", "approve", data["id"]])
    assert "tier team" in res.output
    res = runner.invoke(cli, ["--kb", home, "learned", "show", data["id"], "--json"])
    assert json.loads(res.output)["trust"] == "team"
    res = runner.invoke(cli, ["--kb", home, "learn", "--domain", "bad domain!", "x"])
    assert res.exit_code == 2 and "domain" in res.output


def test_health_finds_broken_orphans_duplicates_conflicts_stale(project: Path) -> None:
    docs = project / "docs"
    para = (
        "The watchdog must be fed every 500 ms by the main loop or the controller resets "
        "and logs a brown-out event in the fault register.\n"
    )
    write(docs / "a" / "wd.md", "# Watchdog\n\n" + para)
    write(docs / "b" / "wd-copy.md", "# Watchdog copy\n\n" + para)
    table = (
        "# Registers\n\n| Register | Offset | Reset value |\n|---|---|---|\n| CTRL | 0x00 | {} |\n"
    )
    write(docs / "a" / "regs.md", table.format("0x0000_0001"))
    write(docs / "b" / "regs-old.md", table.format("0x0000_0000"))
    with open_kb(project) as kb:
        kb.index([docs])
        cited = kb.search("3V3 rail feeds SoC").hits[0].anchor.id
        findings = (
            "Brown-out at 2.9 V resets the SoC during motor start.",
            "The PMIC enables 1V8 only after 3V3 is good for 10 ms.",
            "Measured idle current is 140 mA with Wi-Fi off.",
        )
        for text in findings:
            assert learn(kb, text, domain="power", anchors=[cited]).created
        old = time.time() - 400 * 86400
        os.utime(docs / "power.md", (old, old))
        kb.conn.execute(
            "UPDATE documents SET mtime_ns = ? WHERE path LIKE '%power.md'", (int(old * 1e9),)
        )
        report = check_content(kb)
    assert not report["ok"]
    by = {}
    for f in report["findings"]:
        by.setdefault(f["check"], []).append(f)
    assert report["counts"]["broken_link"] == 2
    assert {Path(f["path"]).name for f in by["orphan"]} >= {"lonely.md", "wd.md"}
    dup = by["duplicate"][0]
    assert {Path(dup["path"]).name, Path(dup["other"].split(":")[0]).name} == {
        "wd.md",
        "wd-copy.md",
    }
    conflict = next(f for f in by["conflict"] if "CTRL" in f["message"])
    assert "0x0000_0001" in conflict["message"] and "0x0000_0000" in conflict["message"]
    assert len(conflict["anchors"]) == 2 and all(conflict["anchors"])
    assert [Path(f["path"]).name for f in by["stale"]] == ["power.md"]
    assert report["counts"]["golden"] == 0


def test_doctor_content_exit_status_and_json(project: Path) -> None:
    with open_kb(project) as kb:
        kb.index([project / "docs"])
    runner = CliRunner()
    home = str(project / ".clawkb")
    res = runner.invoke(cli, ["--kb", home, "doctor", "--content", "--json"])
    assert res.exit_code == 1, res.output
    data = json.loads(res.output)
    assert data["healthy"] and data["content"]["counts"]["broken_link"] == 2
    res = runner.invoke(cli, ["--kb", home, "doctor", "--content"])
    assert "FAIL  broken_link" in res.output and "note  orphan" in res.output
    assert res.output.index("broken_link") > res.output.index("integrity")
    res = runner.invoke(cli, ["--kb", home, "doctor"])
    assert res.exit_code == 0 and "broken_link" not in res.output


def test_similarity_and_duplicate_pairs() -> None:
    a = shingles("DDR 布线规则：差分对长度匹配在 5 mil 以内")
    b = shingles("DDR 布线规则：差分对长度匹配在 5 mil 以内。")
    c = shingles("电源上电顺序：先 3V3 再 1V8")
    assert jaccard(a, b) == 1.0 and jaccard(a, c) < 0.2
    items = [
        ("x", "alpha beta gamma delta epsilon zeta eta theta iota"),
        ("y", "alpha beta gamma delta epsilon zeta eta theta kappa"),
        ("z", "entirely different words about power rails and sequencing order here"),
    ]
    pairs = duplicate_pairs(items, 0.7)
    assert [(p[0], p[1]) for p in pairs] == [("x", "y")]


def test_table_records_in_hit_json(tmp_path: Path) -> None:
    text = "| Item | Bin |\n|---|---|\n| M3 screw | B-12 |\n| Spacer | C\\|4 |\n\nnot a table"
    assert table_records(text) == [
        {"Item": "M3 screw", "Bin": "B-12"},
        {"Item": "Spacer", "Bin": "C|4"},
    ]
    write(tmp_path / "docs" / "bins.md", "# Bins\n\n" + text + "\n")
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        kb.index([tmp_path / "docs"])
        hit = kb.search("M3 screw bin").hits[0]
    assert hit_dict(hit)["records"][0] == {"Item": "M3 screw", "Bin": "B-12"}
