"""Trust re-ranking, the domain router and the graph channel on small real KBs."""

from __future__ import annotations

import json
from pathlib import Path

from clawkb import KnowledgeBase
from clawkb.knowledge.graph import expand
from clawkb.knowledge.ranking import apply_trust
from clawkb.knowledge.router import DomainRouter
from clawkb.knowledge.search import OFF, KnowledgeOptions


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def make_kb(tmp: Path, config: str) -> KnowledgeBase:
    write(tmp / ".clawkb" / "config.yaml", config)
    kb = KnowledgeBase.open(tmp / ".clawkb", create=True)
    kb.index([tmp / "docs"])
    return kb


def test_trust_weights_min_tier_and_strict_priority(tmp_path: Path) -> None:
    d = tmp_path / "docs"
    write(d / "manuals" / "uart.md", "# Manual\n\nThe debug UART2 baud rate is 1500000.\n")
    write(
        d / "forum" / "uart.md",
        "# What is the debug UART2 baud rate?\n\nI think the debug UART2 baud rate is 115200;"
        " the UART2 baud rate 115200 works for me, debug UART2 baud rate.\n",
    )
    write(d / "notes" / "uart.md", "# Notes\n\nUART2 debug baud rate is set in the bootloader.\n")
    kb = make_kb(
        tmp_path,
        'sources:\n  "manuals/*": official\n  "forum/*": community\n'
        "knowledge:\n  trust_weights: {official: 1.0, team: 0.9, community: 0.01}\n",
    )
    with kb:
        hits = kb.search("debug UART2 baud rate", limit=10, knowledge=OFF).hits
        assert hits[0].trust == "community"  # lexically the chatty post wins
        tiered = kb.search("debug UART2 baud rate", limit=2).hits  # sources: → tiers on
        assert [h.trust for h in tiered] == ["official", "team"]
        only = kb.search("debug UART2 baud rate", knowledge=KnowledgeOptions(min_trust="official"))
        assert [h.trust for h in only.hits] == ["official"]
        weights = kb.config.knowledge.trust_weights
        ranked = apply_trust(hits, weights, explain=True)
        assert ranked[0].trust == "official" and [h.rank for h in ranked] == [1, 2, 3]
        assert ranked[0].explanation["trust"] == {"tier": "official", "weight": 1.0}
        assert ranked[-1].trust == "community"
        team_up = apply_trust(hits, {}, min_trust="team")
        assert {h.trust for h in team_up} == {"official", "team"}
        strict = apply_trust(hits, {}, strict=True)
        assert [h.trust for h in strict] == ["official", "team", "community"]


def test_router_picks_the_domain_and_falls_back_when_unsure(tmp_path: Path) -> None:
    d = tmp_path / "docs"
    write(d / "nav" / "a.md", "# Lidar\n\nlidar odometry costmap waypoint 激光雷达 定位\n")
    write(d / "nav" / "b.md", "# SLAM\n\nslam localization map obstacle planner 建图\n")
    write(d / "ddr" / "a.md", "# DDR\n\nddr dram trace impedance termination 走线 阻抗\n")
    write(d / "power" / "a.md", "# PMIC\n\npmic regulator buck ldo ripple 纹波 电源\n")
    write(d / "shared.md", "# Shared\n\nthe board setting check\n")
    kb = make_kb(tmp_path, "domains:\n  nav: [nav/*]\n  ddr: [ddr/*]\n  power: ['power/*']\n")
    with kb:
        router = DomainRouter.from_store(kb.conn)
        assert router.route("lidar costmap on the board").domains == ("nav",)
        assert router.route("走线 阻抗").domains[0] == "ddr"
        assert router.route("buck ripple").domains == ("power",)
        unsure = router.route("the board setting")
        assert unsure.domains == () and unsure.reason.startswith(("unsure", "no domain term"))
        assert router.route("quantum chromodynamics").domains == ()
        assert router.route("lidar").to_dict()["domains"] == ["nav"]


def test_graph_channel_reaches_the_linked_passage(tmp_path: Path) -> None:
    d = tmp_path / "docs"
    write(
        d / "symptom.md",
        "# Arm stops with error E42\n\nThe arm stops with error E42 after homing."
        " The fix is in [[Encoder fix#Procedure]].\n",
    )
    write(
        d / "Encoder fix.md",
        "# Encoder fix\n\n## Background\n\nWhy encoders fail.\n\n## Procedure\n\n"
        "Replace the joint cable and recalibrate.\n",
    )
    for i in range(4):
        write(d / f"other{i}.md", f"# Arm log {i}\n\nThe arm stops sometimes, error unknown {i}.\n")
    kb = make_kb(tmp_path, "")
    with kb:
        hits = kb.search("arm stops with error E42", limit=5).hits
        assert hits[0].anchor.path.endswith("symptom.md")
        assert not any("Encoder fix" in h.anchor.path for h in hits[:3])
        more = expand(kb, "arm stops with error E42", hits, weight=0.9, explain=True)
        second = more[1]
        assert second.anchor.path.endswith("Encoder fix.md")
        assert second.anchor.heading_path == ("Encoder fix", "Procedure")
        assert (
            second.explanation["graph"]["path"]
            == "reached via [[Encoder fix#Procedure]] from hit 1"
        )
        assert [h.rank for h in more] == list(range(1, len(more) + 1))
        assert expand(kb, "arm", hits, weight=0.0) == list(hits)


def test_tune_fits_weights_checks_held_out_and_writes_config(tmp_path: Path) -> None:
    import yaml
    from click.testing import CliRunner

    from clawkb.cli.main import cli

    d = tmp_path / "docs"
    entries = []
    for i in range(6):
        subject = f"widget{i} torque limit"
        write(d / "manuals" / f"m{i}.md", f"# Manual {i}\n\nThe {subject} is {i + 1} Nm.\n")
        write(
            d / "forum" / f"f{i}.md",
            f"# {subject}?\n\nI think the {subject} is {i + 9} Nm; {subject} {subject}.\n",
        )
        entries.append({"query": f"{subject}", "expect_path": f"manuals/m{i}.md"})
    golden = tmp_path / "golden.yaml"
    golden.write_text(yaml.safe_dump({"queries": entries}), encoding="utf-8")
    make_kb(
        tmp_path,
        'sources:\n  "manuals/*": official\n  "forum/*": community\n'
        "domains:\n  mech: [manuals/*, forum/*]\n"
        "knowledge:\n  trust_weights: {official: 1.0, community: 1.0}\n  stale_days: 30\n"
        "  trust_band: 1.0\n",
    ).close()
    res = CliRunner().invoke(
        cli, ["--kb", str(tmp_path / ".clawkb"), "tune", str(golden), "--write", "--json"]
    )
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert report["held_out"]["tuned"] > report["held_out"]["default"]
    assert report["weights"]["trust_weights"]["community"] < 1.0
    saved = yaml.safe_load((tmp_path / ".clawkb" / "config.yaml").read_text())
    assert saved["sources"] == {"manuals/*": "official", "forum/*": "community"}
    assert saved["knowledge"]["stale_days"] == 30
    assert saved["knowledge"]["trust_weights"]["community"] < 1.0
    assert report["domains"]["mech"]["queries"] == 6
    assert set(saved["knowledge"]["domain_weights"]["mech"]) == {
        "w_lexical",
        "w_dense",
        "graph_weight",
    }
    with KnowledgeBase.open(tmp_path / ".clawkb") as kb:
        assert kb.config.knowledge.trust_weights["community"] < 1.0
        assert kb.config.knowledge.domain_weights["mech"].w_lexical == 1.0  # no vectors
        hits = kb.search("widget2 torque limit", limit=3).hits  # routed to mech: tuned weights
        assert hits[0].anchor.path.endswith("manuals/m2.md")


def test_search_cli_routes_filters_and_explains(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from clawkb.cli.main import cli

    d = tmp_path / "docs"
    write(d / "nav" / "a.md", "# Lidar\n\nlidar odometry costmap waypoint board\n")
    write(d / "ddr" / "a.md", "# DDR\n\nddr dram trace impedance board\n")
    write(d / "power" / "a.md", "# PMIC\n\npmic regulator buck board [[Lidar]]\n")
    write(d / "general.md", "# Board\n\nthe board lidar overview\n")
    make_kb(tmp_path, "domains:\n  nav: [nav/*]\n  ddr: [ddr/*]\n  power: ['power/*']\n").close()
    home = str(tmp_path / ".clawkb")
    run = CliRunner().invoke
    res = run(cli, ["--kb", home, "search", "lidar costmap", "--explain", "--json"])
    assert res.exit_code == 0, res.output
    hits = json.loads(res.output)["hits"]
    assert {h["domain"] for h in hits} <= {"nav", None}  # routed: nav + notes of no domain
    assert hits[0]["explanation"]["route"]["domains"] == ["nav"]
    res = run(cli, ["--kb", home, "search", "board", "--domain", "ddr", "--json"])
    assert [h["domain"] for h in json.loads(res.output)["hits"]] == ["ddr"]
    res = run(cli, ["--kb", home, "search", "pmic buck", "--explain", "--graph", "--no-route"])
    assert "graph: reached via [[Lidar]] from hit 1" in res.output
    res = run(cli, ["--kb", home, "search", "board", "--min-trust", "gospel"])
    assert res.exit_code == 2 and "gospel" in res.output


def test_router_adds_domain_centroids_when_vectors_exist(tmp_path: Path) -> None:
    import numpy as np

    from clawkb.embed.run import embed_kb
    from clawkb.embed.static import StaticEmbedder
    from clawkb.embed.vectors import model_key
    from clawkb.knowledge.router import domain_centroids, route_kb

    d = tmp_path / "docs"
    write(d / "nav" / "a.md", "# Lidar\n\nlidar odometry costmap waypoint localization\n")
    write(d / "nav" / "b.md", "# SLAM\n\nslam map obstacle planner\n")
    write(d / "power" / "a.md", "# PMIC\n\npmic regulator buck ldo ripple battery\n")
    kb = make_kb(tmp_path, "domains:\n  nav: [nav/*]\n  power: ['power/*']\n")
    with kb:
        assert route_kb(kb, "lidar costmap").reason == "lexical"  # no vectors yet
        embedder = StaticEmbedder()
        embed_kb(kb, embedder=embedder)
        cents = domain_centroids(kb.conn, model_key(embedder.signature()))
        assert set(cents) == {"nav", "power"}
        assert all(abs(float(np.linalg.norm(v)) - 1.0) < 1e-6 for v in cents.values())
        route = route_kb(kb, "lidar costmap")
        assert route.reason == "lexical + centroids" and route.domains == ("nav",)
        assert route_kb(kb, "buck regulator ripple").domains == ("power",)
