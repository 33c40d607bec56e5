"""Fixtures for bench/knowledge.py, generated deterministically (seeded).

* trust: an official manual and a community post disagree on one value per
  topic (12 English, 12 Chinese topics); the post repeats the question's words,
  so plain lexical ranking tends to put it first.
* domains: five domains (manipulation, navigation, ddr, power, vision) of
  English and Chinese notes drawn from each domain's vocabulary plus shared
  filler words; queries are a note's distinctive words plus filler.
* graph: symptom notes that link (``[[...]]``) to the note holding the fix,
  which shares few words with the symptom; distractors share the fix's words.
"""

from __future__ import annotations

import random
from pathlib import Path

TRUST_TOPICS = [
    ("debug UART2 baud rate", "1500000", "115200"),
    ("DDR4 trace length matching tolerance", "5 mil", "25 mil"),
    ("gripper maximum clamping force", "40 N", "80 N"),
    ("lidar scan frequency", "10 Hz", "20 Hz"),
    ("motor driver peak current", "3.2 A", "5 A"),
    ("watchdog timeout", "500 ms", "2 s"),
    ("camera MIPI lane count", "4 lanes", "2 lanes"),
    ("battery charge cutoff voltage", "4.20 V", "4.35 V"),
    ("IMU sample rate", "1 kHz", "400 Hz"),
    ("CAN bus bitrate", "1 Mbit/s", "500 kbit/s"),
    ("SPI flash clock limit", "104 MHz", "133 MHz"),
    ("arm joint 3 speed limit", "180 deg/s", "360 deg/s"),
    ("调试串口波特率", "1500000", "921600"),
    ("DDR 走线等长误差", "5 mil", "20 mil"),
    ("夹爪最大夹持力", "40 牛", "60 牛"),
    ("激光雷达扫描频率", "10 赫兹", "15 赫兹"),
    ("电机驱动峰值电流", "3.2 安", "6 安"),
    ("看门狗超时时间", "500 毫秒", "1 秒"),
    ("摄像头 MIPI 通道数", "4 通道", "2 通道"),
    ("电池充电截止电压", "4.20 伏", "4.40 伏"),
    ("IMU 采样率", "1 千赫", "200 赫兹"),
    ("CAN 总线波特率", "1 兆", "250 千"),
    ("SPI 闪存时钟上限", "104 兆赫", "150 兆赫"),
    ("机械臂三号关节限速", "180 度每秒", "300 度每秒"),
]


def _zh(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def build_trust(root: Path) -> list[tuple[str, str, str]]:
    """Files under root/manuals and root/forum; (query, official path, community path)."""
    out = []
    for i, (subject, official, community) in enumerate(TRUST_TOPICS):
        man, forum = root / "manuals" / f"t{i:02d}.md", root / "forum" / f"t{i:02d}.md"
        man.parent.mkdir(parents=True, exist_ok=True)
        forum.parent.mkdir(parents=True, exist_ok=True)
        if _zh(subject):
            man.write_text(
                f"# 参考手册 第 {i + 3} 章\n\n## 规格\n\n{subject}为 {official}，"
                f"以本手册为准，修订版 C。\n",
                encoding="utf-8",
            )
            forum.write_text(
                f"# 求助：{subject}到底是多少？\n\n我记得{subject}是 {community}。"
                f"群里也有人说{subject}用 {community} 没问题，{subject}实测可以。\n",
                encoding="utf-8",
            )
            query = f"{subject}是多少"
        else:
            man.write_text(
                f"# Reference manual, chapter {i + 3}\n\n## Specifications\n\n"
                f"The {subject} is {official} (revision C).\n",
                encoding="utf-8",
            )
            forum.write_text(
                f"# What is the {subject}?\n\nI think the {subject} is {community}. "
                f"Someone said the {subject} of {community} works; what {subject} do you use?\n",
                encoding="utf-8",
            )
            query = f"what is the {subject}"
        out.append((query, man.as_posix(), forum.as_posix()))
    return out


def _words(text: str) -> list[str]:
    return text.split()


DOMAIN_WORDS = {
    "manipulation": _words(
        "gripper grasp finger torque wrist payload clamp suction pick place jaw "
        "夹爪 抓取 手指 力矩 手腕 负载 吸盘 抓放"
    ),
    "navigation": _words(
        "lidar odometry costmap waypoint localization slam path planner obstacle map "
        "激光雷达 里程计 代价地图 路径 定位 建图 避障 航点"
    ),
    "ddr": _words(
        "ddr dram trace impedance termination skew dqs strobe routing length "
        "走线 阻抗 端接 等长 时序 布线 颗粒 内存"
    ),
    "power": _words(
        "pmic regulator rail buck ldo brownout sequencing ripple battery charger "
        "电源 稳压 纹波 上电 电池 充电 降压 掉电"
    ),
    "vision": _words(
        "camera lens exposure calibration mipi isp focus pixel stereo depth "
        "相机 镜头 曝光 标定 对焦 像素 双目 深度"
    ),
}
FILLER = "the board check value setting issue note use test when after before system "
FILLER += "板子 设置 问题 检查 使用 测试 系统 参数"
FILLER_WORDS = FILLER.split()


def _sentence(rng: random.Random, words: list[str], n: int) -> str:
    picks = [rng.choice(words) for _ in range(n)] + [rng.choice(FILLER_WORDS) for _ in range(n)]
    rng.shuffle(picks)
    return " ".join(picks) + "."


def build_domains(
    root: Path, per_domain: int = 12, queries_per_domain: int = 14, mixed: int = 2
) -> tuple[dict[str, list[str]], list[tuple[str, str, str]]]:
    """Notes under root/<domain>/; (globs per domain, [(query, domain, relevant path)]).

    Per domain, ``mixed`` more queries name one of the note's words and
    one word of another domain: the router cannot be sure, and routing to the wrong one would lose
    the answer (these calibrate the router's "unsure" threshold)."""
    rng = random.Random(7)
    globs: dict[str, list[str]] = {}
    queries: list[tuple[str, str, str]] = []
    for domain, words in DOMAIN_WORDS.items():
        folder = root / domain
        folder.mkdir(parents=True, exist_ok=True)
        globs[domain] = [f"{domain}/*"]
        paths = []
        for i in range(per_domain):
            key = [rng.choice(words) for _ in range(2)]
            body = " ".join(_sentence(rng, words, 4) for _ in range(4))
            path = folder / f"n{i:02d}.md"
            path.write_text(f"# {' '.join(key)} {i}\n\n{body} {' '.join(key)}.\n", encoding="utf-8")
            paths.append((path, key))
        for j in range(queries_per_domain):
            path, key = paths[j % per_domain]
            extra = rng.choice(words)
            others = [w for d, ws in DOMAIN_WORDS.items() if d != domain for w in ws]
            noise = rng.choice(others) if j % 2 else ""  # every other query strays once
            q = f"{key[0]} {extra} {rng.choice(FILLER_WORDS)} {noise} {key[1]}".replace("  ", " ")
            queries.append((q, domain, path.as_posix()))
        names = list(DOMAIN_WORDS)
        for j in range(mixed):
            path, key = paths[(j * 5 + 3) % per_domain]
            other = names[(names.index(domain) + 1 + j) % len(names)]
            stray = rng.sample(DOMAIN_WORDS[other], 1)
            q = f"{key[0]} {rng.choice(FILLER_WORDS)} {' '.join(stray)}"
            queries.append((q, domain, path.as_posix()))
    return globs, queries


GRAPH_TOPICS = [
    ("robot arm stops with error E{n}", "replace the encoder cable on joint {n}"),
    ("lidar drops frames on port {n}", "lower the USB autosuspend delay to {n} seconds"),
    ("camera image flickers at mode {n}", "set the anti-banding filter to {n} Hz"),
    ("battery gauge jumps on pack {n}", "recalibrate the coulomb counter with profile {n}"),
    ("机械臂报错 E{n} 停机", "更换 {n} 号关节的编码器线缆"),
    ("雷达在端口 {n} 丢帧", "把 USB 自动挂起延时改成 {n} 秒"),
]


def build_graph(root: Path, pairs: int = 30) -> list[tuple[str, str]]:
    """Symptom notes linking to fix notes, plus distractors; [(query, fix path)]."""
    root.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(pairs):
        symptom, fix = GRAPH_TOPICS[i % len(GRAPH_TOPICS)]
        n = 100 + i
        fix_title = f"Fix {n}" if not _zh(fix) else f"修复 {n}"
        (root / f"symptom-{n}.md").write_text(
            f"# {symptom.format(n=n)}\n\nSeen in the field log {n}. "
            f"The cause is known; the procedure is in [[{fix_title}]].\n",
            encoding="utf-8",
        )
        (root / f"{fix_title}.md").write_text(
            f"# {fix_title}\n\nProcedure: {fix.format(n=n)}, then power cycle and verify.\n",
            encoding="utf-8",
        )
        out.append((symptom.format(n=n), (root / f"{fix_title}.md").as_posix()))
    for k in range(12):  # distractors: fix words, no link
        fix = GRAPH_TOPICS[k % len(GRAPH_TOPICS)][1].format(n=200 + k)
        (root / f"misc-{k}.md").write_text(
            f"# Maintenance log {k}\n\nOnce we had to {fix}; the robot arm and lidar and "
            f"camera were fine after that. 机械臂 雷达 正常。\n",
            encoding="utf-8",
        )
    return out


def build_specs(root: Path, n: int = 24) -> list[tuple[str, str]]:
    """Register pages where links do not help: each block's overview page repeats the
    query's words and links to a glossary page; the answer is the register's own page,
    which plain search ranks second. [(query, register page path)]"""
    root.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        reg = f"R{i}"
        (root / f"reg-{i}.md").write_text(
            f"# {reg}\n\nBits 0 to 7 hold the mode, bits 8 to 15 the divider. The reset"
            f" value of register {reg} is 0x{i:02X}00; writes are ignored while the block is"
            " held in reset, and reads return the last value written.\n",
            encoding="utf-8",
        )
        (root / f"overview-{i}.md").write_text(
            f"# Register {reg} reset value overview\n\nRegister {reg} reset value, register"
            f" {reg} fields; the terms are in [[Glossary {i}]].\n",
            encoding="utf-8",
        )
        (root / f"Glossary {i}.md").write_text(
            f"# Glossary {i}\n\nTerms of block {i}: bit, field, mask, strobe.\n",
            encoding="utf-8",
        )
        out.append((f"register {reg} reset value", (root / f"reg-{i}.md").as_posix()))
    return out
