"""Golden-query checks: file validation, hit matching, and a run on a tiny real KB."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawkb.errors import ConfigError, NotFoundError
from clawkb.retrieve.golden import GoldenQuery, check_golden, load_golden
from clawkb.types import Anchor, Hit

DOCS = {
    "hw/ddr-layout.md": (
        "# DDR 布线指南\n\n## 阻抗\n\nDDR4 数据线单端走线阻抗控制在 40 欧姆，差分时钟 80 欧姆。\n\n"
        "## 等长\n\n同组数据线等长误差小于 5 mil。\n"
    ),
    "fw/uart.md": "# UART 配置\n\nUSART2 波特率 115200，8N1，引脚 PA2 TX / PA3 RX。\n",
    "power.md": "# Power budget\n\nThe 3.3V LDO supplies 500 mA; the buck converter feeds the 1.2V core.\n",
}

PASSING = """\
k: 3
threshold: 0.9
queries:
  - query: "DDR 走线阻抗"
    expect_path: "ddr-layout.md"
    expect_heading: "阻抗"
  - query: "UART 波特率 115200"
    expect_path: "fw/uart.md"
  - query: "LDO 3.3V current"
    expect_path: "power.md"
"""

# The second query expects the wrong file, so hit@3 = 2/3 < 0.9.
FAILING = PASSING.replace('expect_path: "fw/uart.md"', 'expect_path: "power.md"', 1).replace(
    "k: 3", "k: 1"
)


def hit(path: str, heading: tuple[str, ...] = (), rank: int = 1) -> Hit:
    anchor = Anchor(id="x", path=path, line_start=1, line_end=2, heading_path=heading)
    return Hit(rank=rank, score=1.0, anchor=anchor, text="")


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_path_matches_by_whole_segment_suffix() -> None:
    q = GoldenQuery("q", "ddr-layout.md")
    assert q.matches(hit("ddr-layout.md"))
    assert q.matches(hit("hw/ddr-layout.md"))
    assert not q.matches(hit("hw/old-ddr-layout.md"))  # suffix must start a segment
    assert GoldenQuery("q", "hw/ddr-layout.md").matches(hit("boards/hw/ddr-layout.md"))


def test_heading_is_case_insensitive_substring_of_heading_path() -> None:
    q = GoldenQuery("q", "ddr.md", expect_heading="impedance")
    assert q.matches(hit("ddr.md", ("DDR Guide", "Trace Impedance")))
    assert not q.matches(hit("ddr.md", ("DDR Guide", "Length matching")))
    assert not q.matches(hit("ddr.md"))


def test_load_golden_defaults(tmp_path: Path) -> None:
    golden = load_golden(write(tmp_path, "g.yaml", "queries:\n  - {query: a, expect_path: b.md}\n"))
    assert (golden.k, golden.threshold) == (3, 0.9)
    assert golden.queries == (GoldenQuery("a", "b.md", None),)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("queries: [\n", r"g\.yaml: not valid YAML"),
        ("- a\n- b\n", r"g\.yaml: expected a mapping"),
        ("queries: []\n", "'queries' must be a non-empty list"),
        ("k: 0\nqueries: [{query: a, expect_path: b}]\n", "'k' must be a positive integer"),
        ("threshold: 2\nqueries: [{query: a, expect_path: b}]\n", "'threshold' must be"),
        (
            "queries:\n  - {query: a, expect_path: b}\n  - {query: c}\n",
            r"g\.yaml: queries entry 2: missing or empty 'expect_path'",
        ),
        ("queries:\n  - just a string\n", "queries entry 1: expected a mapping"),
        (
            "queries:\n  - {query: a, expect_path: b, expect_heding: c}\n",
            "queries entry 1: unknown key.*expect_heding",
        ),
    ],
)
def test_bad_golden_files(tmp_path: Path, text: str, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        load_golden(write(tmp_path, "g.yaml", text))


def test_missing_golden_file(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="golden file not found"):
        load_golden(tmp_path / "nope.yaml")


@pytest.fixture
def kb_home(tmp_path: Path) -> Path:
    """A real KB with the three documents above indexed from a folder."""
    from clawkb.kb import KnowledgeBase

    root = tmp_path / "notes"
    for rel, text in DOCS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    home = tmp_path / "kb"
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([root])
    return home


def test_check_golden_pass_and_fail(kb_home: Path, tmp_path: Path) -> None:
    from clawkb.kb import KnowledgeBase

    with KnowledgeBase.open(kb_home) as kb:
        good = check_golden(kb, write(tmp_path, "good.yaml", PASSING))
        bad = check_golden(kb, write(tmp_path, "bad.yaml", FAILING))
        overridden = check_golden(kb, tmp_path / "bad.yaml", threshold=0.5)
    assert good.passed and good.hits == 3 and good.hit_at_k == 1.0
    assert good.results[0].rank == 1
    assert not bad.passed and bad.k == 1 and bad.hits == 2
    (failure,) = bad.failures
    assert failure.query.query == "UART 波特率 115200"
    assert len(failure.top_paths) == 1 and failure.top_paths[0].endswith("fw/uart.md")
    assert failure.rank is None or failure.rank > 1
    assert overridden.passed and overridden.threshold == 0.5
    assert bad.to_dict()["results"][1]["passed"] is False


def test_check_command_exit_codes(kb_home: Path, tmp_path: Path) -> None:
    from clawkb.cli.main import cli

    good = write(tmp_path, "good.yaml", PASSING)
    bad = write(tmp_path, "bad.yaml", FAILING)
    runner = CliRunner()
    ok = runner.invoke(cli, ["--kb", str(kb_home), "check", str(good)])
    assert ok.exit_code == 0, ok.output
    assert "hit@3 = 1.00 (3/3) threshold 0.90: PASS" in ok.output

    failed = runner.invoke(cli, ["--kb", str(kb_home), "check", str(bad)])
    assert failed.exit_code == 1, failed.output
    assert "FAIL 'UART 波特率 115200'" in failed.output
    assert re.search(r"1\. \S*fw/uart\.md", failed.output)
    assert "hit@1 = 0.67 (2/3) threshold 0.90: FAIL" in failed.output

    as_json = runner.invoke(
        cli, ["--kb", str(kb_home), "check", str(bad), "--threshold", "0.5", "--json"]
    )
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output)["hits"] == 2

    broken = runner.invoke(
        cli, ["--kb", str(kb_home), "check", str(write(tmp_path, "x.yaml", "k: ["))]
    )
    assert broken.exit_code == 2
    assert "not valid YAML" in broken.output
