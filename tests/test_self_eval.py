"""`clawkb eval --self`: golden queries from the user's own KB (issue 19 item 8)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from clawkb.cli.main import cli
from clawkb.evaluate.self_check import generate
from clawkb.kb import KnowledgeBase

EN = {
    "guide/uart.md": "# UART driver\n\n## Baud rate setup\n\nCall `uart_set_baudrate()` "
    "before `uart_driver_install()`; CONFIG_UART_ISR_IN_IRAM keeps the ISR in IRAM.\n\n"
    "## Flow control\n\nHardware flow control uses RTS and CTS.\n",
    "guide/gpio.md": "# GPIO matrix\n\n## Pull resistors\n\nGPIOB_PUPDR selects pull-up or "
    "pull-down; the register sits at 0x4002_040C.\n\n## Interrupts\n\nAn ObserverEvent fires "
    "on each edge.\n",
    "guide/overview.md": "# Overview\n\nThis guide covers the peripheral drivers.\n",
}
ZH = {
    "guide/uart.md": "# UART 驱动程序\n\n## 波特率设置\n\n先调用波特率设置函数，再安装驱动。\n\n"
    "## 流控\n\n硬件流控使用 RTS 和 CTS 引脚。\n",
    "guide/gpio.md": "# GPIO 交换矩阵\n\n## 上下拉电阻\n\n寄存器选择上拉或下拉。\n\n"
    "## 中断\n\n每个边沿都会触发事件。\n",
}


def run(*args: str) -> Any:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("self")
    for lang, docs in (("en", EN), ("zh_CN", ZH)):
        for rel, text in docs.items():
            p = root / "docs" / lang / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, "utf-8")
    home = root / "kb"
    run("--kb", str(home), "index", str(root / "docs"))
    return home


def test_generated_queries_name_their_answers(home: Path) -> None:
    with KnowledgeBase.open(home) as kb:
        rows = list(kb.repo.chunks_by_ids(kb.repo.all_chunk_ids()).values())
    qs = generate(rows, per_kind=50)
    idents = {q.query for q in qs["identifier"]}
    assert {"uart_set_baudrate", "CONFIG_UART_ISR_IN_IRAM", "GPIOB_PUPDR"} <= idents
    assert {"0x4002_040C", "ObserverEvent"} <= idents
    sections = {q.query: q for q in qs["section"]}
    assert "Baud rate setup" in sections and "波特率设置" in sections
    assert sections["Baud rate setup"].heading_path == ("UART driver", "Baud rate setup")
    # both languages of a page: each title points at the other page
    zh2en = {q.query: Path(q.path).parts[-3:] for q in qs["zh2en"]}
    assert zh2en["UART 驱动程序"] == ("en", "guide", "uart.md")
    en2zh = {q.query: Path(q.path).parts[-3:] for q in qs["en2zh"]}
    assert en2zh["GPIO matrix"] == ("zh_CN", "guide", "gpio.md")
    assert "Overview" not in en2zh  # no Chinese twin
    # the same KB gives the same sample
    assert generate(rows, per_kind=2) == generate(rows, per_kind=2)
    assert all(len(v) <= 2 for v in generate(rows, per_kind=2).values())


def test_cli_table_and_json_with_dense(home: Path, tmp_path: Path) -> None:
    pytest.importorskip("static_model")
    lexical = json.loads(run("--kb", str(home), "eval", "--self", "--json").output)
    assert lexical["modes"] == ["lexical", "default"]
    assert lexical["kinds"]["identifier"]["hit@k"]["lexical"] == 1.0
    # a copy with vectors from the small static model: a dense column appears
    copy = tmp_path / "kb"
    shutil.copytree(home, copy)
    (copy / "config.yaml").write_text("embedding: static\n", "utf-8")
    run("--kb", str(copy), "embed")
    data = json.loads(run("--kb", str(copy), "eval", "--self", "--json").output)
    assert data["modes"] == ["lexical", "dense", "default"] and data["k"] == 3
    assert set(data["kinds"]) == {"section", "identifier", "zh2en", "en2zh"}
    for row in data["kinds"].values():
        assert row["queries"] >= 1
        assert all(0.0 <= v <= 1.0 for v in row["hit@k"].values())
    text = run("--kb", str(copy), "eval", "--self").output
    assert text.splitlines()[0].split()[-3:] == ["lexical", "dense", "default"]
    assert any(line.startswith("identifier") for line in text.splitlines())


def test_eval_needs_a_dataset_or_self(home: Path) -> None:
    res = CliRunner().invoke(cli, ["--kb", str(home), "eval"])
    assert res.exit_code == 2 and "--self" in res.output


def test_http_endpoint_and_status_page(home: Path) -> None:
    pytest.importorskip("fastapi")
    from server_helpers import browser_page, serving

    with serving(home) as srv:
        data = srv.ok("GET", "/api/v1/eval/self", params={"per_kind": 5})
        assert data["kinds"]["identifier"]["queries"] == 5
        assert srv.get("/api/v1/eval/self", params={"per_kind": 0}).status_code == 400
        with browser_page(srv.url + "/#status") as page:
            if page is None:
                return
            from playwright.sync_api import expect

            page.locator("#self-run").click()
            row = page.locator("#self-table tr[data-kind=identifier]")
            expect(row).to_contain_text("identifier")
            expect(row.locator("td.num").first).to_have_text("1.00")
