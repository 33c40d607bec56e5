"""Shared set-up for the Milvus backend tests: small real corpora and KB folders."""

from __future__ import annotations

from pathlib import Path

import yaml

PROBES = {
    "clock.md": "# 时钟配置\n\nSTM32F401RE 的时钟配置: RCC base 0x4001_3000, APB2 总线.\n",
    "kernel.md": "# Kernel\n\nLinux v5.15.32 with CONFIG_SMP and I2C_SCL on pin PB8; 钟表 is not a clock tree.\n",
    "misc.md": "# Misc\n\n配时 and 置钟 are unrelated words; 0x4001 appears alone here, 3000 too.\n",
    "uart.md": "# UART\n\nUSART2 TX is PA2 and RX is PA3 at 115200 baud. 串口 波特率 配置.\n",
}


def write_corpus(root: Path, files: dict[str, str] | None = None, extra: int = 0) -> Path:
    """The probe files plus ``extra`` generated notes (two sections each)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in (files or PROBES).items():
        (root / name).write_text(text, encoding="utf-8")
    for i in range(extra):
        (root / f"note{i:03d}.md").write_text(
            f"# Note {i}\n\nRegister R{i} of block B{i % 7} sets mode {i % 5}.\n\n"
            f"## 细节 {i}\n\n第{i}号寄存器 控制 模式 {i % 3}; see GPIO{i % 11} and TIM{i % 4}.\n",
            encoding="utf-8",
        )
    return root


def make_kb_home(home: Path, uri: str, collection: str, **backend: object) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    conf = {
        "embedding": "static",
        "backend": {"kind": "milvus", "uri": uri, "collection": collection, **backend},
    }
    (home / "config.yaml").write_text(yaml.safe_dump(conf), encoding="utf-8")
    return home
