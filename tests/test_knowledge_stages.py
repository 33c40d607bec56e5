"""The knowledge stages by default and everywhere: trust band, routing safety, and the
same stages in ask, context and memory recall (one pipeline), on small real KBs."""

from __future__ import annotations

import random
from pathlib import Path

from clawkb import KnowledgeBase
from clawkb.knowledge.ranking import apply_trust
from clawkb.knowledge.router import DomainRouter, confirm, query_terms
from clawkb.knowledge.search import OFF, KnowledgeOptions
from clawkb.types import Anchor, Hit

TOPICS = [
    ("debug UART2 baud rate", "1500000", "115200"),
    ("gripper clamping force", "40 N", "80 N"),
    ("watchdog timeout", "500 ms", "2 s"),
    ("调试串口波特率", "1500000", "921600"),
    ("看门狗超时时间", "500 毫秒", "1 秒"),
]
SOURCES = 'sources:\n  "manuals/*": official\n  "forum/*": community\n'


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def trust_docs(root: Path) -> list[tuple[str, str]]:
    """A manual and a chatty forum post per topic; [(query, manual path suffix)]."""
    out = []
    for i, (subject, official, community) in enumerate(TOPICS):
        zh = any("\u4e00" <= c <= "\u9fff" for c in subject)
        if zh:
            write(root / "manuals" / f"m{i}.md", f"# 手册\n\n## 规格\n\n{subject}为 {official}。\n")
            write(
                root / "forum" / f"f{i}.md",
                f"# {subject}是多少？\n\n我记得{subject}是 {community}，{subject}{subject}。\n",
            )
            out.append((f"{subject}是多少", f"manuals/m{i}.md"))
        else:
            write(root / "manuals" / f"m{i}.md", f"# Manual\n\nThe {subject} is {official}.\n")
            write(
                root / "forum" / f"f{i}.md",
                f"# What is the {subject}?\n\nI think the {subject} is {community}; "
                f"the {subject} of {community} works, {subject}.\n",
            )
            out.append((f"what is the {subject}", f"manuals/m{i}.md"))
    return out


def make_kb(tmp: Path, config: str, folder: str = "docs") -> KnowledgeBase:
    write(tmp / ".clawkb" / "config.yaml", config)
    kb = KnowledgeBase.open(tmp / ".clawkb", create=True)
    kb.index([tmp / folder])
    return kb


def test_trust_band_puts_the_official_passage_first_by_default(tmp_path: Path) -> None:
    cases = trust_docs(tmp_path / "docs")
    with make_kb(tmp_path, SOURCES) as kb:
        weights = kb.config.knowledge.trust_weights
        assert kb.config.knowledge.trust_band == 0.5 and not kb.config.knowledge.strict_priority
        weights_alone = 0
        for query, manual in cases:
            plain = kb.search(query, limit=20, knowledge=OFF).hits
            assert plain[0].trust == "community", query  # the chatty post wins lexically
            weights_alone += apply_trust(plain, weights)[0].anchor.path.endswith(manual)
            top = kb.search(query, limit=5).hits[0]  # the default search: weights + band
            assert top.anchor.path.endswith(manual) and top.trust == "official", query
        assert weights_alone < len(cases)  # the weights alone do not do it
    write(tmp_path / ".clawkb" / "config.yaml", SOURCES + "knowledge:\n  trust_band: 1.0\n")
    with KnowledgeBase.open(tmp_path / ".clawkb") as kb:  # band 1 = the weights alone
        firsts = [kb.search(q, limit=5).hits[0].trust for q, _ in cases]
        assert "community" in firsts


def _hit(i: int, score: float, trust: str) -> Hit:
    return Hit(i, score, Anchor(f"a{i}", f"p{i}.md", 1, 1), "t", trust=trust)


def test_trust_band_orders_by_tier_within_the_band_and_is_a_no_op_for_one_tier() -> None:
    hits = [_hit(1, 10.0, "community"), _hit(2, 6.0, "official"), _hit(3, 4.0, "official")]
    banded = apply_trust(hits, {}, band=0.5)
    assert [h.anchor.id for h in banded] == ["a2", "a1", "a3"]  # 6 >= 0.5 * 10: official up
    assert [h.anchor.id for h in apply_trust(hits, {}, band=0.7)] == ["a1", "a2", "a3"]
    assert [h.anchor.id for h in apply_trust(hits, {}, strict=True)] == ["a2", "a3", "a1"]
    assert [h.rank for h in banded] == [1, 2, 3]
    rng = random.Random(5)
    for _ in range(200):  # one tier (the shared datasets): the score order, unchanged
        scores = [round(rng.uniform(0, 20), rng.choice((0, 3))) for _ in range(rng.randint(1, 30))]
        same = [_hit(i, s, "team") for i, s in enumerate(scores)]
        ranked = apply_trust(same, {"team": 0.9}, band=rng.choice((0.0, 0.3, 0.5, 1.0)))
        expect = sorted(same, key=lambda h: -h.score)
        assert [h.anchor.id for h in ranked] == [h.anchor.id for h in expect]


def test_router_counts_each_written_word_once_and_search_keeps_the_best_hits_domain(
    tmp_path: Path,
) -> None:
    weights = dict(query_terms("ddr4 里程计"))
    assert "里" not in weights and weights["里程"] == 1.0  # a Chinese run counts by bigrams
    assert weights["ddr4"] == weights["ddr"] == weights["4"] == 1 / 3  # one identifier
    d = tmp_path / "docs"
    for i in range(8):
        write(d / "power" / f"p{i}.md", f"# Rail {i}\n\npmic buck regulator rail ripple {i}.\n")
        write(d / "nav" / f"n{i}.md", f"# Map {i}\n\nlidar costmap odometry planner map {i}.\n")
    write(d / "power" / "odd.md", "# Odd\n\nThe zebracorn zebracorn pmic note.\n")
    config = "domains:\n  power: ['power/*']\n  nav: ['nav/*']\n"
    with make_kb(tmp_path, config) as kb:
        router = DomainRouter.from_store(kb.conn)
        query = "zebracorn lidar costmap planner"  # nav words; the answer: power
        alone = router.route(query)
        assert alone.domains == ("nav",)
        plain = kb.search(query, limit=5, knowledge=OFF).hits
        assert plain[0].anchor.path.endswith("power/odd.md")
        checked = confirm(alone, plain[0].domain)
        assert checked.domains == ("nav", "power") and "best hit in power" in checked.reason
        routed = kb.search(query, limit=5, explain=True).hits  # routing on (domains:)
        assert routed[0].anchor.path.endswith("power/odd.md")
        assert routed[0].explanation["route"]["domains"] == ["nav", "power"]
        assert confirm(checked, "elsewhere").domains == ()  # two domains, still out: all


def test_the_stages_apply_to_ask_context_and_memory_recall(tmp_path: Path) -> None:
    from clawkb.answer import answer
    from clawkb.hardware import hardware_context, index_datasheets

    cases = trust_docs(tmp_path / "docs")
    sheets = tmp_path / "sheets"
    write(sheets / "vendor.md", "# Board X\n\n## Reset\n\nHold nRESET low for 10 ms.\n")
    write(
        sheets / "copied.md",
        "# Board X reset (copied from a forum)\n\n## Reset\n\nnRESET low for 1 ms, nRESET low,"
        " hold nRESET low, reset reset.\n",
    )
    config = SOURCES + '  "**/copied.md": community\n'
    with make_kb(tmp_path, config) as kb:
        index_datasheets(kb, datasheets=[sheets])
        # ask: its passages come from the same pipeline, tiers included
        query, manual = cases[0]
        out = answer(kb, query, llm="none", limit=3)
        assert out.passages[0].anchor.path.endswith(manual)
        # context (datasheets only, no board: a restricted pipeline query)
        plain = kb.search("hold nRESET low reset", limit=5, knowledge=OFF, path_glob="*/sheets/*")
        assert plain.hits[0].anchor.path.endswith("copied.md")
        ctx = hardware_context(kb, "hold nRESET low reset", limit=2)
        assert [p["trust"] for p in ctx["passages"]] == ["official", "community"]
        assert all("/sheets/" in p["path"] for p in ctx["passages"])  # restriction kept
        # memory recall: memories pass through the stage (tier shown), documents too
        kb.memory.store("The watchdog timeout on the lab robot is 500 ms; see [[m2]].")
        rec = kb.memory.recall("watchdog timeout", include_documents=True, explain=True)
        mem = [h for h in rec.hits if h.source == "memory"]
        assert mem and all("trust" in (h.hit.explanation or {}) for h in mem)
        docs = [h for h in rec.hits if h.source == "document"]
        assert docs[0].hit.anchor.path.endswith(cases[2][1])  # the manual before the forum
        only = kb.memory.recall("watchdog timeout")  # graph passages stay out of memories
        assert only.hits and all(h.source == "memory" for h in only.hits)
        assert all(h.hit.anchor.path.startswith("memory://") for h in only.hits)


def test_search_options_filter_by_tier_and_domain(tmp_path: Path) -> None:
    trust_docs(tmp_path / "docs")
    config = SOURCES + "domains:\n  specs: ['manuals/*']\n  chat: ['forum/*']\n"
    with make_kb(tmp_path, config) as kb:
        hits = kb.search("watchdog timeout", knowledge=KnowledgeOptions(domains=("chat",))).hits
        assert hits and {h.domain for h in hits} == {"chat"}
        hits = kb.search("watchdog timeout", knowledge=KnowledgeOptions(min_trust="official"))
        assert hits.hits and {h.trust for h in hits.hits} == {"official"}


def test_tune_fits_per_domain_graph_weights_that_win_on_the_held_out_half(
    tmp_path: Path,
) -> None:
    import yaml
    from click.testing import CliRunner

    from clawkb.cli.main import cli

    d = tmp_path / "docs"
    entries = []
    for i in range(8):  # fixes: the symptom note links to the fix, which shares no word
        write(
            d / "fixes" / f"symptom-{i}.md",
            f"# Arm stops with error E{i}\n\nSeen in log {i}; the procedure is in [[Fix {i}]].\n",
        )
        write(d / "fixes" / f"Fix {i}.md", f"# Fix {i}\n\nReplace encoder cable {i}.\n")
        entries.append({"query": f"arm stops with error E{i}", "expect_path": f"fixes/Fix {i}.md"})
    for i in range(8):  # specs: the overview links to a glossary; the answer is the register
        write(
            d / "specs" / f"reg-{i}.md",
            f"# R{i}\n\nBits 0 to 7 hold the mode, bits 8 to 15 the divider. The reset value"
            f" of register R{i} is 0x{i}00; writes are ignored while the block is in reset.\n",
        )
        write(
            d / "specs" / f"overview-{i}.md",
            f"# Register R{i} reset value overview\n\nRegister R{i} reset value, register R{i}"
            f" fields; the terms are in [[Glossary {i}]].\n",
        )
        write(d / "specs" / f"Glossary {i}.md", f"# Glossary {i}\n\nbit, field, mask.\n")
        entries.append({"query": f"register R{i} reset value", "expect_path": f"specs/reg-{i}.md"})
    golden = tmp_path / "golden.yaml"
    golden.write_text(yaml.safe_dump({"queries": entries}), encoding="utf-8")
    config = "domains:\n  fixes: ['fixes/*']\n  specs: ['specs/*']\n"
    held = entries[1:8:2] + entries[9:16:2]  # each domain's entries 1, 3, 5, 7

    def mrr(kb: KnowledgeBase) -> float:
        total = 0.0
        for e in held:
            paths = [h.anchor.path for h in kb.search(e["query"], limit=10).hits]
            want = (d / e["expect_path"]).as_posix()
            total += 1 / (paths.index(want) + 1) if want in paths else 0.0
        return total / len(held)

    with make_kb(tmp_path, config) as kb:
        before = mrr(kb)
    res = CliRunner().invoke(
        cli, ["--kb", str(tmp_path / ".clawkb"), "tune", str(golden), "--write", "--json"]
    )
    assert res.exit_code == 0, res.output
    fitted = yaml.safe_load((tmp_path / ".clawkb" / "config.yaml").read_text())["knowledge"]
    weights = fitted["domain_weights"]
    assert weights["specs"]["graph_weight"] < weights["fixes"]["graph_weight"]
    with KnowledgeBase.open(tmp_path / ".clawkb") as kb:
        assert mrr(kb) > before
