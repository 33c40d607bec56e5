"""Generated PDF fixtures: a 30-page bilingual datasheet with its golden queries.

The datasheet describes a fictional microcontroller, "CKB32F7", in English
and Chinese (reportlab's built-in ``STSong-Light`` CID font, so the Chinese is
a real CID/CJK text layer). It has numbered chapters in large bold type,
sections in smaller bold type, a running header and footer on every page, and
five ruled tables (one long enough to continue on the next page without a
repeated header).

Each golden query names a *marker*: a flowable whose page is recorded while
reportlab lays the document out, so the expected page of every query comes
from the layout itself, never from a hand-written number.

    python bench/pdfgen.py OUT_DIR      # writes datasheet.pdf and golden.json
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.cidfonts import UnicodeCIDFont
from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

CJK_FONT = "STSong-Light"
PAGES = 30


def _styles() -> dict[str, ParagraphStyle]:
    pdfmetrics.registerFont(UnicodeCIDFont(CJK_FONT))
    body = ParagraphStyle("body", fontName="Helvetica", fontSize=10, leading=13, spaceAfter=6)
    return {
        "h1": ParagraphStyle(
            "h1", fontName="Helvetica-Bold", fontSize=18, leading=22, spaceAfter=10
        ),
        "h2": ParagraphStyle(
            "h2", fontName="Helvetica-Bold", fontSize=13, leading=16, spaceAfter=6
        ),
        "h1zh": ParagraphStyle("h1zh", fontName=CJK_FONT, fontSize=18, leading=22, spaceAfter=10),
        "h2zh": ParagraphStyle("h2zh", fontName=CJK_FONT, fontSize=13, leading=16, spaceAfter=6),
        "body": body,
        "zh": ParagraphStyle("zh", parent=body, fontName=CJK_FONT, wordWrap="CJK"),
    }


@dataclass(frozen=True)
class Golden:
    query: str
    marker: str  # the flowable whose page is the expected page
    expect_text: str  # a string the hit's chunk must contain


# -- content -------------------------------------------------------------------

_EN_FILLER = [
    "The {topic} block is clocked from the APB bus and can be gated off to save power.",
    "Software must wait for the ready flag before it changes the {topic} configuration.",
    "All {topic} registers are accessed by words; byte access raises a bus error.",
    "The {topic} interrupt is routed to the NVIC and can wake the core from sleep.",
    "Reset clears every {topic} register to its documented reset value.",
    "In debug mode the {topic} counters can be frozen by the DBGMCU control bits.",
    "Refer to the reference manual for timing diagrams of the {topic} interface.",
]
_ZH_FILLER = [
    "{topic}模块由总线时钟驱动，不使用时可以关闭时钟以降低功耗。",
    "修改{topic}配置之前，软件必须等待就绪标志置位。",
    "复位后{topic}的所有寄存器恢复为默认值。",
    "{topic}中断连接到嵌套向量中断控制器，可以把内核从睡眠中唤醒。",
    "调试时可以通过调试控制寄存器冻结{topic}计数器。",
]

# (chapter title, Chinese title, topic, Chinese topic, pages of prose)
_CHAPTERS: list[tuple[str, str, str, str]] = [
    ("1 Product overview", "产品概述", "core", "内核"),
    ("2 Pinout and pin description", "引脚定义", "pin", "引脚"),
    ("3 Memory map", "存储器映射", "bus matrix", "总线矩阵"),
    ("4 Power management", "电源管理", "power controller", "电源控制器"),
    ("5 Reset and clock control", "复位和时钟控制", "clock controller", "时钟控制器"),
    ("6 General-purpose I/O", "通用输入输出", "GPIO", "通用输入输出端口"),
    ("7 USART", "通用同步异步收发器", "USART", "串口"),
    ("8 Analog-to-digital converter", "模数转换器", "ADC", "模数转换器"),
    ("9 Watchdogs", "看门狗", "watchdog", "看门狗"),
    ("10 Electrical characteristics", "电气特性", "supply", "电源"),
    ("11 Package and ordering information", "封装与订购信息", "package", "封装"),
]


class _Doc(SimpleDocTemplate):
    """Records the page of every flowable that carries a ``marker`` attribute."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.markers: dict[str, int] = {}

    def afterFlowable(self, flowable: Any) -> None:
        marker = getattr(flowable, "marker", None)
        if marker and marker not in self.markers:
            self.markers[marker] = self.page


def _mark(flowable: Any, marker: str) -> Any:
    flowable.marker = marker
    return flowable


def _grid(rows: list[list[str]], widths: list[float] | None = None) -> Table:
    table = Table(rows, colWidths=widths, repeatRows=0)
    table.setStyle(
        TableStyle(
            [
                ("GRID", (0, 0), (-1, -1), 0.5, colors.black),
                ("FONTNAME", (0, 0), (-1, -1), CJK_FONT),
                ("FONTSIZE", (0, 0), (-1, -1), 8.5),
                ("TOPPADDING", (0, 0), (-1, -1), 2),
                ("BOTTOMPADDING", (0, 0), (-1, -1), 2),
                ("BACKGROUND", (0, 0), (-1, 0), colors.lightgrey),
            ]
        )
    )
    return table


def _prose(
    rng: random.Random, st: dict[str, ParagraphStyle], topic: str, zh: str, n: int
) -> list[Any]:
    out: list[Any] = []
    for _ in range(n):
        en = " ".join(rng.choice(_EN_FILLER).format(topic=topic) for _ in range(5))
        out.append(Paragraph(en, st["body"]))
        out.append(
            Paragraph("".join(rng.choice(_ZH_FILLER).format(topic=zh) for _ in range(4)), st["zh"])
        )
    return out


def _tables() -> dict[str, list[list[str]]]:
    pins = [["Pin", "Name", "Type", "Alternate functions"]]
    for n in range(1, 65):
        port = "ABCD"[(n - 1) // 16]
        name = f"P{port}{(n - 1) % 16}"
        alt = {
            "PA9": "USART1_TX / TIM1_CH2",
            "PA10": "USART1_RX / TIM1_CH3",
            "PB6": "I2C1_SCL",
            "PB7": "I2C1_SDA",
            "PA5": "SPI1_SCK / ADC1_IN5",
            "PC13": "RTC_TAMP1 / WKUP2",
        }.get(name, "-")
        pins.append([str(n), name, "I/O FT", alt])
    return {
        "pins": pins,
        "memory": [
            ["Bus", "Boundary address", "Peripheral"],
            ["APB2", "0x4001_3800 - 0x4001_3BFF", "USART1"],
            ["APB2", "0x4001_2000 - 0x4001_23FF", "ADC1"],
            ["APB1", "0x4000_7000 - 0x4000_73FF", "PWR"],
            ["AHB1", "0x4002_3800 - 0x4002_3BFF", "RCC"],
            ["AHB1", "0x4002_0000 - 0x4002_03FF", "GPIOA"],
            ["APB1", "0x4000_3000 - 0x4000_33FF", "IWDG"],
            ["AHB1", "0x4002_3C00 - 0x4002_3FFF", "FLASH interface"],
        ],
        "gpio": [
            ["Offset", "Register", "Reset value", "Description"],
            ["0x00", "GPIOx_MODER", "0xA800_0000", "port mode 模式"],
            ["0x04", "GPIOx_OTYPER", "0x0000_0000", "output type 输出类型"],
            ["0x08", "GPIOx_OSPEEDR", "0x0C00_0000", "output speed 输出速度"],
            ["0x0C", "GPIOx_PUPDR", "0x6400_0000", "pull-up/pull-down 上下拉"],
            ["0x18", "GPIOx_BSRR", "0x0000_0000", "bit set/reset 置位复位"],
            ["0x20", "GPIOx_AFRL", "0x0000_0000", "alternate function low 复用功能"],
        ],
        "baud": [
            ["Baud rate", "fPCLK = 16 MHz error", "fPCLK = 84 MHz error"],
            ["9600", "0.00 %", "0.02 %"],
            ["115200", "0.08 %", "0.02 %"],
            ["921600", "-3.55 %", "0.16 %"],
            ["2000000", "0.00 %", "-4.55 %"],
        ],
        "absmax": [
            ["Symbol", "Ratings 额定值", "Min", "Max", "Unit"],
            ["VDD", "External main supply voltage 主电源电压", "-0.3", "4.0", "V"],
            ["VIN", "Input voltage on FT pins 输入电压", "VSS-0.3", "5.5", "V"],
            ["IVDD", "Total current into VDD 总电流", "-", "240", "mA"],
            ["TSTG", "Storage temperature 存储温度", "-65", "150", "°C"],
            ["TJ", "Maximum junction temperature 结温", "-", "125", "°C"],
        ],
    }


# Each chapter: pages; each page: items. Items: ("h2", text) · ("fact", marker, text)
# (Chinese when the text has CJK) · ("table", name, first_row, last_row) · ("prose", n).
_T = _tables()
_PLAN: list[list[list[tuple[Any, ...]]]] = [
    [  # 1 overview
        [
            (
                "fact",
                "overview",
                "The CKB32F7 is a 32-bit Arm Cortex-M4 microcontroller running at up to 84 MHz with 512 KB of Flash and 96 KB of SRAM.",
            ),
            ("prose", 3),
        ],
        [
            ("h2", "1.1 Features"),
            (
                "fact",
                "features",
                "Features: floating-point unit, 12-bit ADC, three USARTs, two I2C buses, four SPI ports and a true random number generator.",
            ),
            ("prose", 3),
        ],
        [
            ("h2", "1.2 器件说明"),
            (
                "fact",
                "zh-overview",
                "本器件面向电池供电的工业传感器节点，支持超低功耗运行和安全启动。",
            ),
            ("prose", 3),
        ],
    ],
    [  # 2 pinout
        [
            (
                "fact",
                "zh-pins",
                "引脚定义：所有标记为 FT 的引脚均为五伏容忍输入，复位后默认为模拟输入模式。",
            ),
            ("prose", 3),
        ],
        [("h2", "2.1 LQFP64 pin assignment"), ("table", "pins", 0, 36, "pins-1")],
        [("table", "pins", 36, 65, "pins-2"), ("prose", 1)],
    ],
    [  # 3 memory map
        [("table", "memory", 0, 99, "memory"), ("prose", 2)],
        [
            ("h2", "3.1 Embedded Flash memory"),
            (
                "fact",
                "flash-ws",
                "Flash memory wait states 等待周期: at 84 MHz and 3.3 V the FLASH_ACR LATENCY field must be set to 2 wait states.",
            ),
            ("prose", 3),
        ],
    ],
    [  # 4 power
        [
            ("h2", "4.1 Power supply schemes"),
            (
                "fact",
                "pwr-cr1",
                "The PWR_CR1 register holds the LPDS bit: set LPDS to put the regulator in low-power mode during Stop.",
            ),
            ("prose", 3),
        ],
        [
            ("h2", "4.2 Low-power modes"),
            (
                "fact",
                "zh-stop",
                "停止模式下所有时钟停止，唤醒时间典型值为 12 微秒，SRAM 和寄存器内容保持不变。",
            ),
            ("prose", 3),
        ],
        [
            ("h2", "4.3 待机模式"),
            ("fact", "zh-standby", "待机模式电流典型值为 2.4 微安，只有备份域和唤醒引脚保持供电。"),
            ("prose", 3),
        ],
    ],
    [  # 5 RCC
        [
            ("h2", "5.1 Clock sources"),
            (
                "fact",
                "zh-hse",
                "外部晶振 HSE 的频率范围为 4 至 26 MHz，启动时间取决于晶体和负载电容。",
            ),
            ("prose", 3),
        ],
        [
            ("h2", "5.2 Clock tree"),
            (
                "fact",
                "clock-tree",
                "The clock tree feeds SYSCLK from HSI, HSE or the main PLL through the AHB and APB prescalers.",
            ),
            ("prose", 3),
        ],
        [
            ("h2", "5.3 PLL configuration"),
            (
                "fact",
                "pllcfgr",
                "RCC_PLLCFGR sets the PLL: PLLM divides the input, PLLN multiplies it (50 to 432) and PLLP divides the VCO output.",
            ),
            ("prose", 3),
        ],
    ],
    [  # 6 GPIO
        [
            ("h2", "6.1 GPIO functional description"),
            (
                "fact",
                "gpio-desc",
                "Each port bit can be input, output, alternate function or analog; the output stage is push-pull or open-drain.",
            ),
            ("prose", 3),
        ],
        [("h2", "6.2 GPIO register map"), ("table", "gpio", 0, 99, "gpio"), ("prose", 2)],
        [
            ("h2", "6.3 Alternate function selection"),
            (
                "fact",
                "afr",
                "The AFRL and AFRH registers select one of sixteen alternate functions AF0 to AF15 for each pin.",
            ),
            ("prose", 3),
        ],
    ],
    [  # 7 USART
        [
            ("h2", "7.1 USART features"),
            (
                "fact",
                "usart-dma",
                "DMA request mapping: USART1 transmit uses DMA2 stream 7 channel 4 and receive uses DMA2 stream 2 channel 4.",
            ),
            ("prose", 3),
        ],
        [("h2", "7.2 Baud rate generation"), ("table", "baud", 0, 99, "baud"), ("prose", 2)],
        [
            ("h2", "7.3 USART interrupts"),
            (
                "fact",
                "usart-irq",
                "USART interrupt events include TXE, TC, RXNE, IDLE and the overrun error ORE.",
            ),
            ("prose", 3),
        ],
    ],
    [  # 8 ADC
        [
            ("h2", "8.1 ADC main features"),
            ("fact", "zh-adc", "模数转换器的采样时间可以在 3 到 480 个时钟周期之间按通道配置。"),
            ("prose", 3),
        ],
        [
            ("h2", "8.2 Regular channels"),
            (
                "fact",
                "adc-sqr1",
                "ADC_SQR1 holds the regular sequence length L[3:0] and the last conversions of the regular sequence.",
            ),
            ("prose", 3),
        ],
        [
            ("h2", "8.3 Temperature sensor"),
            (
                "fact",
                "vsense",
                "The temperature sensor output VSENSE is connected to ADC1_IN18 with an average slope of 2.5 mV per degree.",
            ),
            ("prose", 3),
        ],
    ],
    [  # 9 watchdogs
        [
            ("h2", "9.1 Independent watchdog"),
            (
                "fact",
                "iwdg",
                "Writing 0xCCCC to IWDG_KR starts the independent watchdog; writing 0xAAAA reloads the counter.",
            ),
            ("prose", 3),
        ],
        [
            ("h2", "9.2 窗口看门狗"),
            (
                "fact",
                "zh-wwdg",
                "窗口看门狗在计数器到达窗口值之前刷新会产生复位，用于检测程序跑飞。",
            ),
            ("prose", 3),
        ],
    ],
    [  # 10 electrical
        [
            ("h2", "10.1 Absolute maximum ratings"),
            ("table", "absmax", 0, 99, "absmax"),
            ("prose", 2),
        ],
        [
            ("h2", "10.2 Operating conditions"),
            (
                "fact",
                "opcond",
                "Operating conditions: VDD from 1.7 V to 3.6 V, ambient temperature from -40 to 85 degrees.",
            ),
            ("prose", 3),
        ],
        [
            ("h2", "10.3 EMC characteristics"),
            (
                "fact",
                "esd",
                "Electrostatic discharge: ESD HBM class 2 withstands 2000 V and the charged device model withstands 500 V.",
            ),
            ("prose", 3),
        ],
    ],
    [  # 11 package
        [
            ("h2", "11.1 LQFP64 package information"),
            (
                "fact",
                "lqfp64",
                "LQFP64 package dimensions: body 10 x 10 mm, lead pitch 0.5 mm, height 1.6 mm.",
            ),
            ("prose", 3),
        ],
        [
            ("h2", "11.2 Ordering information"),
            (
                "fact",
                "ordering",
                "Ordering information: CKB32F7RET6 means LQFP64, 512 KB Flash, industrial temperature range, tray packing.",
            ),
            ("prose", 3),
        ],
    ],
]

GOLDEN: list[Golden] = [
    Golden("USART1_TX pin", "pins-1", "PA9"),
    Golden("PC13 RTC_TAMP1 WKUP2", "pins-2", "PC13"),
    Golden("USART1 boundary address 0x4001_3800", "memory", "0x4001_3800"),
    Golden("RCC boundary address", "memory", "0x4002_3800"),
    Golden("GPIOx_OSPEEDR reset value", "gpio", "0x0C00_0000"),
    Golden("GPIOx_BSRR 置位复位", "gpio", "GPIOx_BSRR"),
    Golden("115200 baud error 84 MHz", "baud", "115200"),
    Golden("VDD absolute maximum ratings", "absmax", "4.0"),
    Golden("存储温度 TSTG", "absmax", "TSTG"),
    Golden("RCC_PLLCFGR PLLN", "pllcfgr", "PLLN"),
    Golden("ADC_SQR1 regular sequence length", "adc-sqr1", "ADC_SQR1"),
    Golden("PWR_CR1 LPDS", "pwr-cr1", "LPDS"),
    Golden("IWDG_KR 0xCCCC", "iwdg", "0xCCCC"),
    Golden("Clock tree", "clock-tree", "Clock tree"),
    Golden("Low-power modes", "zh-stop", "Low-power modes"),
    Golden("Ordering information", "ordering", "Ordering information"),
    Golden("LQFP64 package dimensions", "lqfp64", "lead pitch"),
    Golden("停止模式 唤醒时间", "zh-stop", "停止模式"),
    Golden("待机模式电流", "zh-standby", "待机模式"),
    Golden("模数转换器 采样时间", "zh-adc", "采样时间"),
    Golden("窗口看门狗", "zh-wwdg", "窗口看门狗"),
    Golden("五伏容忍 引脚", "zh-pins", "五伏容忍"),
    Golden("外部晶振频率范围", "zh-hse", "外部晶振"),
    Golden("Flash wait states 等待周期", "flash-ws", "LATENCY"),
    Golden("DMA request mapping USART1", "usart-dma", "DMA2"),
    Golden("ESD HBM 2000 V", "esd", "HBM"),
    Golden("temperature sensor slope VSENSE", "vsense", "VSENSE"),
]


def _chapter_flowables(
    n: int, pages: list[list[tuple[Any, ...]]], st: dict[str, ParagraphStyle], rng: random.Random
) -> list[Any]:
    title, zh_title, topic, zh_topic = _CHAPTERS[n]
    out: list[Any] = [Paragraph(f"{title} {zh_title}", st["h1zh"])]
    for page in pages:
        for item in page:
            kind = item[0]
            if kind == "h2":
                style = st["h2zh"] if any("\u4e00" <= c <= "\u9fff" for c in item[1]) else st["h2"]
                out.append(_mark(Paragraph(item[1], style), f"h2:{item[1]}"))
            elif kind == "fact":
                style = st["zh"] if any("\u4e00" <= c <= "\u9fff" for c in item[2]) else st["body"]
                out.append(_mark(Paragraph(item[2], style), item[1]))
            elif kind == "table":
                rows = _T[item[1]]
                body = rows[max(item[2], 1) : item[3]] if item[2] else rows[: item[3]]
                out.append(_mark(_grid(body), item[4]))
                out.append(Spacer(1, 8))
            else:
                out.extend(_prose(rng, st, topic, zh_topic, item[1]))
        out.append(PageBreak())
    return out


def _furniture(canvas: Any, doc: Any) -> None:
    """Running header and footer on every page (the parser should drop them)."""
    canvas.saveState()
    canvas.setFont("Helvetica", 8)
    canvas.drawString(56, A4[1] - 30, "CKB32F7 Datasheet - Rev 2.1 - Production data")
    canvas.drawRightString(A4[0] - 56, 24, f"Page {doc.page} of {PAGES}")
    canvas.restoreState()


def build_datasheet(path: Path, seed: int = 7) -> dict[str, int]:
    """Write the datasheet; returns marker -> 1-based page."""
    st = _styles()
    rng = random.Random(seed)
    story: list[Any] = []
    for n, pages in enumerate(_PLAN):
        story.extend(_chapter_flowables(n, pages, st, rng))
    story.pop()  # no blank page after the last PageBreak
    doc = _Doc(str(path), pagesize=A4, title="CKB32F7 Datasheet", author="clawkb tests")
    doc.build(story, onFirstPage=_furniture, onLaterPages=_furniture)
    return doc.markers


def golden_set(markers: dict[str, int]) -> list[dict[str, Any]]:
    """The golden queries with their expected page, from the recorded layout."""
    return [
        {"query": g.query, "page": markers[g.marker], "expect_text": g.expect_text} for g in GOLDEN
    ]


def main(argv: list[str]) -> int:
    out = Path(argv[1] if len(argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    markers = build_datasheet(out / "datasheet.pdf")
    (out / "golden.json").write_text(json.dumps(golden_set(markers), ensure_ascii=False, indent=1))
    print(f"wrote {out / 'datasheet.pdf'} and {out / 'golden.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))


def build_prose(path: Path, pages: int, seed: int = 11) -> None:
    """``pages`` pages of bilingual prose under chapter and section headings, no tables."""
    st = _styles()
    rng = random.Random(seed)
    story: list[Any] = []
    for p in range(pages):
        title, zh_title, topic, zh_topic = _CHAPTERS[p % len(_CHAPTERS)]
        if p % 3 == 0:
            story.append(Paragraph(f"{title} {zh_title}", st["h1zh"]))
        story.append(Paragraph(f"{p + 1}.1 {topic.title()} notes", st["h2"]))
        story.extend(_prose(rng, st, topic, zh_topic, 3))
        story.append(PageBreak())
    story.pop()
    SimpleDocTemplate(str(path), pagesize=A4).build(story)


def build_tables(path: Path, pages: int) -> None:
    """``pages`` pages, each a ruled 4-column register table of 40 rows."""
    st = _styles()
    story: list[Any] = []
    for p in range(pages):
        story.append(Paragraph(f"Register block {p + 1}", st["h2"]))
        rows = [["Offset", "Register", "Reset value", "Description"]] + [
            [
                f"0x{r * 4:03X}",
                f"BLK{p}_REG{r}",
                f"0x{(p * 97 + r) & 0xFFFF:04X}_0000",
                "控制寄存器 control",
            ]
            for r in range(40)
        ]
        story.append(_grid(rows))
        story.append(PageBreak())
    story.pop()
    SimpleDocTemplate(str(path), pagesize=A4).build(story)
