"""Build the cross-lingual evaluation set (BEIR layout) in bench/data/crossling/.

    .venv/bin/python bench/crossling_build.py [--data ../shared/datasets]

Corpus: every note and datasheet under examples/ (one document per file),
plus a fixed sample of cranfield abstracts (English) and cmrc2018-dev
paragraphs (Chinese) from the shared datasets: the relevant documents of the
queries below and seeded random distractors. Queries were written for this
set: Chinese questions whose answers sit in English text, and English
questions whose answers sit in Chinese text. The cranfield queries are
Chinese renderings of cranfield queries whose English original already finds
a relevant abstract in the top 3 lexically (so the set measures the language
gap, not cranfield's difficulty); the cmrc queries are English renderings of
cmrc questions. The output is committed, so tests and evaluation never need
the shared folder.
"""

from __future__ import annotations

import argparse
import json
import os
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "data" / "crossling"
DISTRACTORS = {"cranfield": 300, "cmrc2018-dev": 150}

# (query id, text, relevant document ids); example documents are paths under examples/
ZH_TO_EN_EXAMPLES = [
    (
        "x01",
        "STM32 ROM 引导程序要求主机先发送的同步字节是什么？",
        ["notes/stm32f401re/bootloader.md"],
    ),
    ("x02", "STM32 串口引导程序的帧格式使用哪种校验？", ["notes/stm32f401re/bootloader.md"]),
    ("x03", "怎样让 STM32F401 从系统存储器启动进入引导程序？", ["notes/stm32f401re/bootloader.md"]),
    ("x04", "引导程序里擦除扇区的命令代码是多少？", ["notes/stm32f401re/bootloader.md"]),
    ("x05", "写存储器命令返回非应答是什么原因？", ["notes/stm32f401re/bootloader.md"]),
    (
        "x06",
        "为什么 GPIOA 模式寄存器的复位值不是零？",
        ["notes/stm32f401re/registers.md", "datasheets/stm32f401-registers.md"],
    ),
    (
        "x07",
        "STM32F401RE 的复位和时钟控制 RCC 基地址是多少？",
        ["notes/stm32f401re/registers.md", "datasheets/stm32f401-registers.md"],
    ),
    (
        "x08",
        "使能 GPIO 端口的时钟要写哪个寄存器的哪一位？",
        [
            "notes/stm32f401re/registers.md",
            "datasheets/stm32f401-registers.md",
            "datasheets/nucleo-f401re.md",
        ],
    ),
    (
        "x09",
        "STM32F401RE 的闪存和静态随机存储器容量是多少？",
        ["notes/stm32f401re/overview.md", "datasheets/nucleo-f401re.md"],
    ),
    (
        "x10",
        "Nucleo 板的虚拟串口用的是哪个 USART，默认波特率多少？",
        ["notes/stm32f401re/overview.md", "datasheets/nucleo-f401re.md"],
    ),
    ("x11", "系统时钟 84 MHz 时锁相环的分频倍频参数怎么配置？", ["notes/stm32f401re/overview.md"]),
    (
        "x12",
        "HAL_GPIO_WritePin 为什么可以在中断服务程序里安全调用？",
        ["notes/stm32f401re/gpio-hal.md"],
    ),
    ("x13", "忘记打开端口时钟会导致写引脚没有任何效果吗？", ["notes/stm32f401re/gpio-hal.md"]),
    ("x14", "用 OpenOCD 烧录固件并校验的命令是什么？", ["notes/stm32f401re/gpio-hal.md"]),
    ("x15", "CAN 总线两端各需要多大的终端电阻？", ["notes/can/tja1051.md"]),
    ("x16", "TJA1051 收发器的 S 引脚控制什么？", ["notes/can/tja1051.md"]),
    ("x17", "CAN 收发器处于静默模式时为什么不发送应答？", ["notes/can/tja1051.md"]),
    ("x18", "TJA1051 总线引脚的静电放电保护等级是多少？", ["notes/can/tja1051.md"]),
    ("x19", "BME280 的 I2C 地址由哪个引脚决定？", ["notes/sensors/bme280.md"]),
    ("x20", "BME280 的芯片标识寄存器读出来是多少？", ["notes/sensors/bme280.md"]),
    ("x21", "为什么湿度过采样控制寄存器要先于测量控制寄存器写入？", ["notes/sensors/bme280.md"]),
    ("x22", "BME280 湿度传感器在 Linux 下用哪个驱动读取？", ["notes/sensors/bme280.md"]),
    ("x23", "ESP32 开发板上哪些引脚只能做输入？", ["datasheets/esp32-devkitc.md"]),
    ("x24", "ESP32 复位时采样的上电配置引脚有哪些？", ["datasheets/esp32-devkitc.md"]),
    ("x25", "树莓派 Pico 的 3.3V 稳压器怎么关闭？", ["datasheets/rpi-pico.md"]),
    ("x26", "Arduino Uno 每个输入输出引脚的最大电流是多少？", ["datasheets/arduino-uno.md"]),
    (
        "x27",
        "ATmega328P 的 TWI 比特率寄存器如何决定 SCL 时钟频率？",
        ["datasheets/atmega328p-registers.md"],
    ),
    ("x28", "I2C 总线的上拉电阻应该选多大？", ["datasheets/generic/i2c-basics.md"]),
    (
        "x29",
        "从 3.3V 引脚驱动红色发光二极管需要多大的串联电阻？",
        ["datasheets/generic-led-wiring.md"],
    ),
    ("x30", "RP2040 单周期 IO 的寄存器基地址是多少？", ["datasheets/rpi-pico.md"]),
]
EN_TO_ZH_EXAMPLES = [
    (
        "y01",
        "What order does the RK3568 BootROM scan the boot media in?",
        ["notes/lx-rk3568/boot-flow.md"],
    ),
    (
        "y02",
        "How do I enter maskrom mode on the LX-RK3568 board?",
        ["notes/lx-rk3568/boot-flow.md"],
    ),
    (
        "y03",
        "What differential impedance is required for DDR4 routing?",
        ["notes/lx-rk3568/ddr-layout.md"],
    ),
    (
        "y04",
        "What length matching tolerance applies within a DDR byte lane?",
        ["notes/lx-rk3568/ddr-layout.md"],
    ),
    (
        "y05",
        "Which PMIC buck channel supplies the DDR memory voltage?",
        ["notes/lx-rk3568/power-tree.md", "notes/lx-rk3568/ddr-layout.md"],
    ),
    (
        "y06",
        "In what power-up sequence does the RK809 turn on its power rails?",
        ["notes/lx-rk3568/power-tree.md"],
    ),
    (
        "y07",
        "What baud rate does the debug serial console use?",
        [
            "notes/lx-rk3568/troubleshooting.md",
            "notes/lx-rk3568/peripherals.md",
            "notes/lx-rk3568/board-overview.md",
            "notes/lx-rk3568/serial-console-boot.txt",
        ],
    ),
    (
        "y08",
        "What are the common causes of DDR training failure?",
        ["notes/lx-rk3568/troubleshooting.md"],
    ),
    (
        "y09",
        "The board does not boot after power on: how to troubleshoot?",
        ["notes/lx-rk3568/troubleshooting.md"],
    ),
    (
        "y10",
        "How do I flash the full update.img image with upgrade_tool?",
        ["notes/lx-rk3568/flashing.md"],
    ),
    ("y11", "What does rkdeveloptool db do in maskrom mode?", ["notes/lx-rk3568/flashing.md"]),
    ("y12", "How do I erase the whole eMMC?", ["notes/lx-rk3568/flashing.md"]),
    (
        "y13",
        "How can I decompile the running device tree with the device tree compiler?",
        ["notes/lx-rk3568/device-tree.md"],
    ),
    (
        "y14",
        "How do I compile and apply a device tree overlay?",
        ["notes/lx-rk3568/device-tree.md"],
    ),
    (
        "y15",
        "How is the Linux GPIO number calculated from the bank and pin?",
        ["notes/lx-rk3568/gpio-header.md"],
    ),
    (
        "y16",
        "Which expansion header pins carry the CAN transmit and receive signals?",
        ["notes/lx-rk3568/gpio-header.md"],
    ),
    (
        "y17",
        "Which SoC pins are used for the I2C1 clock and data lines?",
        ["notes/lx-rk3568/peripherals.md"],
    ),
    (
        "y18",
        "Which GPIO drives the PCIe PERST# reset signal?",
        ["notes/lx-rk3568/peripherals.md", "notes/lx-rk3568/debug-notes.md"],
    ),
    (
        "y19",
        "How do I change the kernel configuration with menuconfig and keep it?",
        ["notes/lx-rk3568/sdk-build.md"],
    ),
    (
        "y20",
        "Which toolchain and cross compiler build the kernel in the SDK?",
        ["notes/lx-rk3568/sdk-build.md"],
    ),
    (
        "y21",
        "PCIe link fail in the kernel log after inserting an NVMe SSD",
        ["notes/lx-rk3568/debug-notes.md"],
    ),
    (
        "y22",
        "Why does the environmental sensor read a temperature that is too high?",
        ["notes/lx-rk3568/debug-notes.md", "notes/lx-rk3568/meeting-2024-03-12.txt"],
    ),
    (
        "y23",
        "What are the memory and storage specifications of the evaluation board?",
        ["notes/lx-rk3568/board-overview.md"],
    ),
]
ZH_TO_EN_CRANFIELD = [
    ("c003", "复合板中的热传导问题目前已经解决了哪些？", "3"),
    ("c009", "关于内部滑移流传热研究的论文", "9"),
    ("c029", "截面形状对带尖锐前缘的三角翼上的流动有什么影响？", "29"),
    ("c034", "是否系统地研究过风洞干扰效应？", "34"),
    ("c059", "沿非圆截面圆柱的边界层流动已知多少？", "59"),
    ("c061", "偏航圆柱周围的局部传热是否有闭合形式的表达式？", "61"),
    ("c065", "剪切流中平板上的边界层会引起压力梯度吗？", "65"),
    ("c090", "激波诱导边界层分离的最新数据", "90"),
    ("c094", "钝体驻点处的理论传热速率是多少？", "94"),
    ("c095", "半球周围的理论传热分布是怎样的？", "95"),
    ("c105", "内部液柱对圆柱壳呼吸振动有什么影响？", "105"),
    ("c132", "蠕变屈曲的理论研究", "132"),
    ("c155", "飞行中烧蚀测量的技术报告", "155"),
    ("c180", "大气中的标高如何随海拔变化？", "180"),
]
EN_TO_ZH_CMRC = [
    ("m01", "What is BCPL?", "DEV_89_QUERY_0"),
    ("m02", "What type of software is Adobe OnLocation?", "DEV_1007_QUERY_0"),
    ("m03", "Why did PukiWiki add support for mobile phone web pages in Japan?", "DEV_335_QUERY_2"),
    ("m04", "In computer science, hashing is a way of processing what?", "DEV_1148_QUERY_0"),
    ("m05", "What are the three major branches of microscopy?", "DEV_527_QUERY_1"),
    ("m06", "What does the throttle valve of a liquid rocket engine regulate?", "DEV_231_QUERY_2"),
    ("m07", "Besides telephone tapping, what else is easily eavesdropped on?", "DEV_599_QUERY_4"),
    (
        "m08",
        "How many years is the in-orbit lifetime of the Sinosat-1 communication satellite?",
        "DEV_69_QUERY_2",
    ),
]


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def _qrels(path: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for line in path.read_text("utf-8").splitlines()[1:]:
        q, d, g = line.split("\t")
        if int(g) > 0:
            out.setdefault(q, set()).add(d)
    return out


def _title(text: str, fallback: str) -> str:
    for line in text.splitlines():
        if line.startswith("title:"):
            return line.split(":", 1)[1].strip()
        if line.startswith("# "):
            return line[2:].strip()
    return fallback


def build(data: Path) -> dict[str, int]:
    docs: list[dict] = []
    for base in ("notes", "datasheets"):
        for p in sorted((ROOT / "examples" / base).rglob("*")):
            if p.suffix in (".md", ".txt") and "drafts" not in p.parts:
                rel = p.relative_to(ROOT / "examples").as_posix()
                text = p.read_text("utf-8")
                docs.append({"_id": rel, "title": _title(text, p.stem), "text": text})
    queries: list[dict] = []
    qrels: list[tuple[str, str]] = []
    for group, lang in ((ZH_TO_EN_EXAMPLES, "zh->en"), (EN_TO_ZH_EXAMPLES, "en->zh")):
        for qid, text, rel in group:
            queries.append({"_id": qid, "text": text, "direction": lang, "source": "examples"})
            qrels += [(qid, d) for d in rel]
    for name, group, lang in (
        ("cranfield", ZH_TO_EN_CRANFIELD, "zh->en"),
        ("cmrc2018-dev", EN_TO_ZH_CMRC, "en->zh"),
    ):
        corpus = {d["_id"]: d for d in _jsonl(data / name / "corpus.jsonl")}
        judged = _qrels(data / name / "qrels.tsv")
        wanted: set[str] = set()
        for qid, text, orig in group:
            rel = sorted(judged[orig])
            wanted.update(rel)
            queries.append(
                {"_id": qid, "text": text, "direction": lang, "source": f"{name}:{orig}"}
            )
            qrels += [(qid, f"{name}:{d}") for d in rel]
        rest = sorted(set(corpus) - wanted)
        wanted.update(random.Random(11).sample(rest, DISTRACTORS[name]))
        for did in sorted(wanted):
            d = corpus[did]
            docs.append({"_id": f"{name}:{did}", "title": d.get("title", ""), "text": d["text"]})
    ids = {d["_id"] for d in docs}
    missing = [d for _, d in qrels if d not in ids]
    if missing:
        raise SystemExit(f"qrels name documents not in the corpus: {missing}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "corpus.jsonl").write_text(
        "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), "utf-8"
    )
    (OUT / "queries.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries), "utf-8"
    )
    (OUT / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in qrels), "utf-8"
    )
    return {"docs": len(docs), "queries": len(queries), "qrels": len(qrels)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("CLAWKB_DATASETS") or str(ROOT.parent / "shared" / "datasets")
    ap.add_argument("--data", default=default, help="the shared datasets folder")
    args = ap.parse_args()
    print(build(Path(args.data)))


if __name__ == "__main__":
    main()
