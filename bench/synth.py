"""Deterministic synthetic bilingual (Chinese + English) technical corpus.

The corpus imitates engineering notes: English prose with part numbers,
register addresses, Kconfig symbols and pin names, Chinese-dominant notes
(continuous CJK text, identifiers embedded with or without spaces) and mixed
documents.  Word frequencies follow a Zipf-like law over a vocabulary that
has a long tail of rare pseudo-words, so posting lists have realistic skew.

Everything is driven by one seed: the same ``(n_docs, seed)`` always yields
the same texts (for one ``GENERATOR_VERSION``), and a smaller corpus is a
prefix of a larger one.
Queries are 2-5 content terms sampled from one random document each; the
document index is kept so a benchmark can check that it is found again.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

#: Bump when the generated texts change, so cached corpora are regenerated.
GENERATOR_VERSION = 4
EN_SHIFT, ZH_SHIFT, ID_SHIFT = 20.0, 20.0, 20.0


def _words(text: str) -> list[str]:
    return text.split()


EN_CORE = _words(
    """
register interrupt clock timer driver kernel memory cache buffer queue thread
process mutex semaphore scheduler device module firmware bootloader flash
sector page address offset pointer stack heap allocator peripheral controller
channel sample voltage current resistor capacitor inductor frequency
oscillator crystal divider prescaler counter compare capture output input pin
port bus serial parallel baud parity frame packet header payload checksum crc
protocol master slave transfer transaction latency throughput bandwidth
overflow underflow error fault exception handler vector priority nesting
enable disable configure initialize reset power sleep wakeup standby regulator
battery sensor accelerometer gyroscope temperature pressure humidity adc dac
pwm duty cycle edge rising falling trigger debounce filter gain amplifier bias
noise ground shield trace layout via footprint schematic netlist connector
header jumper antenna radio wireless bluetooth ethernet socket server client
request response timeout retry backoff handshake certificate encryption
signature key hash token session cookie endpoint route middleware request
database index query transaction commit rollback journal snapshot replica
shard partition compiler linker assembler optimizer symbol section segment
object library binary image partition filesystem mount inode block journal
volume snapshot container image registry cluster node pod service deployment
manifest pipeline artifact release version patch branch merge rebase commit
tag benchmark profile trace metric histogram percentile regression test
fixture assertion coverage mock stub harness simulator emulator debugger
breakpoint watchpoint probe jtag swd uart spi i2c can usb dma gpio rtc wdt
nvic mpu mmu fpu dsp simd vector matrix tensor kernel convolution quantization
inference model weight bias gradient optimizer epoch batch dataset loader
tokenizer embedding attention decoder encoder transformer layer activation
softmax
"""
)
EN_STOP = _words(
    """
the a an of to in on for with by from at is are was be this that it as or and
when then if not can will should must may use used using into over under
"""
)
ZH_CORE = _words(
    """
寄存器 中断 时钟 定时器 驱动 内核 内存 缓存 缓冲区 队列 线程 进程 互斥锁 信号量 调度器 设备 模块 固件
引导程序 闪存 扇区 地址 偏移 指针 堆栈 外设 控制器 通道 采样 电压 电流 电阻 电容 电感 频率 振荡器 晶振
分频器 预分频 计数器 比较 捕获 输出 输入 引脚 端口 总线 串口 波特率 校验 数据帧 报文 负载 协议 主机
从机 传输 延迟 吞吐量 带宽 溢出 错误 故障 异常 处理函数 向量表 优先级 嵌套 使能 禁用 配置 初始化 复位
电源 睡眠 唤醒 待机 稳压器 电池 传感器 加速度计 陀螺仪 温度 压力 湿度 模数转换 数模转换 占空比 上升沿
下降沿 触发 消抖 滤波器 增益 放大器 噪声 接地 屏蔽 走线 过孔 封装 原理图 连接器 天线 无线 蓝牙 以太网
套接字 服务器 客户端 请求 响应 超时 重试 握手 证书 加密 签名 密钥 哈希 令牌 会话 数据库 索引 查询 事务
提交 回滚 日志 快照 副本 分片 分区 编译器 链接器 汇编器 优化器 符号 段 目标文件 库 二进制 镜像 文件系统
挂载 块设备 容器 集群 节点 服务 部署 流水线 版本 补丁 分支 合并 基准测试 性能分析 指标 直方图 回归测试
覆盖率 仿真器 调试器 断点 观察点 探针 看门狗 实时时钟 直接内存访问 浮点单元 向量 矩阵 张量 卷积 量化 推理
模型 权重 梯度 数据集 分词器 嵌入 注意力 解码器 编码器 激活函数 知识库 检索
"""
)
ZH_STOP = _words(
    """
的 是 在 将 和 需要 可以 通过 如果 然后 并且 这个 一个 使用 进行 对 把 后 时
"""
)
_SYLLABLES = _words(
    """
ba ko ri ten vo lu mex sar din qua zel por fin gra tol nix ura pel vik som
"""
)
_MCU_FAMILIES = ["STM32F", "STM32H", "STM32L", "GD32F", "NRF52", "ESP32S", "RP20", "ATSAMD", "LPC"]
_PERIPHS = ["I2C", "SPI", "UART", "USART", "CAN", "TIM", "ADC", "GPIO", "DMA", "USB"]
_CRVZ, _ETGI = list("CRVZ"), list("ETGI")
_SIGNALS = ["SCL", "SDA", "MOSI", "MISO", "SCK", "TX", "RX", "CH1", "CH2", "EN", "IRQ", "CS"]


@dataclass(frozen=True)
class Query:
    """A benchmark query and the index of the document it was sampled from."""

    text: str
    doc: int
    lang: str  # "en", "zh" or "mixed": the language group of the source document


def _zipf_cdf(n: int, exponent: float, shift: float) -> list[float]:
    """Zipf-Mandelbrot: weight of rank r is 1 / (r + shift) ** exponent."""
    weights = 1.0 / (np.arange(1, n + 1, dtype=np.float64) + shift) ** exponent
    return np.cumsum(weights / weights.sum()).tolist()


class _ZipfPicker:
    """Draws items with Zipf-like frequencies from a fixed list, in blocks."""

    def __init__(
        self, items: list[str], rng: np.random.Generator, exponent: float = 1.0, shift: float = 0.0
    ):
        self.items = items
        self._cdf = np.asarray(_zipf_cdf(len(items), exponent, shift))
        self._rng = rng
        self._block: Iterator[int] = iter(())

    def _refill(self) -> None:
        ranks = np.searchsorted(self._cdf, self._rng.random(8192), side="right")
        self._block = iter(np.minimum(ranks, len(self.items) - 1).tolist())

    def __call__(self) -> str:
        rank = next(self._block, None)
        if rank is None:
            self._refill()
            rank = next(self._block)
        return self.items[rank]


def _pseudo_words(rng: np.random.Generator, count: int) -> list[str]:
    seen: set[str] = set()
    words: list[str] = []
    while len(words) < count:
        parts = rng.integers(len(_SYLLABLES), size=int(rng.integers(2, 5)))
        word = "".join(_SYLLABLES[i] for i in parts)
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def _pseudo_zh_words(rng: np.random.Generator, count: int) -> list[str]:
    """Rare two- and three-character words over a few thousand CJK characters."""
    pool = sorted({c for w in ZH_CORE for c in w} | {chr(0x4E00 + 7 * i) for i in range(2500)})
    seen = set(ZH_CORE) | set(ZH_STOP)
    words: list[str] = []
    while len(words) < count:
        word = "".join(pool[i] for i in rng.integers(len(pool), size=int(rng.integers(2, 4))))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def _identifiers(rng: np.random.Generator, count: int) -> list[str]:
    def pick(items: list[str]) -> str:
        return items[int(rng.integers(len(items)))]

    makers = [
        lambda: f"{pick(_MCU_FAMILIES)}{rng.integers(100, 999)}{pick(_CRVZ)}{pick(_ETGI)}",
        lambda: f"0x{rng.integers(0x4000, 0x5FFF):04X}_{rng.integers(0, 0xFFFF):04X}",
        lambda: f"CONFIG_{pick(EN_CORE).upper()}_{pick(EN_CORE).upper()}",
        lambda: f"{pick(_PERIPHS)}{rng.integers(1, 6)}_{pick(_SIGNALS)}",
        lambda: f"{pick(EN_CORE)}_{pick(EN_CORE)}_{pick(['init', 'read', 'write', 'irq'])}",
        lambda: f"v{rng.integers(1, 7)}.{rng.integers(0, 20)}.{rng.integers(0, 40)}",
        lambda: f"{pick(['1.8', '3.3', '5', '12', '24'])}V",
    ]
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < count:
        ident = makers[int(rng.integers(len(makers)))]()
        if ident not in seen:
            seen.add(ident)
            out.append(ident)
    return out


class CorpusGenerator:
    """Yields documents one by one; call :meth:`doc` for each index in order."""

    def __init__(self, seed: int = 13, n_pseudo: int = 30_000, n_ident: int = 8_000):
        rng = np.random.default_rng(seed)
        self.rng = rng
        # The shift flattens the head: the commonest content word is in ~1/5
        # of the documents, as in real technical text once stop words are out.
        self.en = _ZipfPicker(EN_CORE + _pseudo_words(rng, n_pseudo), rng, shift=EN_SHIFT)
        self.en_stop = _ZipfPicker(EN_STOP, rng, 0.8)
        self.zh = _ZipfPicker(ZH_CORE + _pseudo_zh_words(rng, n_pseudo // 6), rng, shift=ZH_SHIFT)
        self.zh_stop = _ZipfPicker(ZH_STOP, rng, 0.8)
        self.ident = _ZipfPicker(_identifiers(rng, n_ident), rng, shift=ID_SHIFT)

    def _en_sentence(self, terms: list[str]) -> str:
        words = []
        for _ in range(int(self.rng.integers(6, 15))):
            roll = self.rng.random()
            if roll < 0.3:
                words.append(self.en_stop())
                continue
            word = self.ident() if roll < 0.4 else self.en()
            terms.append(word)
            words.append(word)
        sentence = " ".join(words)
        return sentence[:1].upper() + sentence[1:] + ". "

    def _zh_sentence(self, terms: list[str]) -> str:
        parts = []
        for _ in range(int(self.rng.integers(4, 11))):
            roll = self.rng.random()
            if roll < 0.25:
                parts.append(self.zh_stop())
                continue
            if roll < 0.33:
                word = self.ident()
                spaced = self.rng.random() < 0.5
                parts.append(f" {word} " if spaced else word)
            else:
                word = self.zh()
                parts.append(word)
            terms.append(word)
        return "".join(parts).strip() + ("。" if self.rng.random() < 0.7 else "，")

    def doc(self) -> tuple[str, list[str], str]:
        """Return ``(text, content_terms, lang)`` for the next document."""
        roll = self.rng.random()
        lang = "zh" if roll < 0.3 else ("en" if roll < 0.7 else "mixed")
        target = int(self.rng.integers(200, 401))
        terms: list[str] = []
        text = ""
        while len(text) < target:
            use_zh = lang == "zh" or (lang == "mixed" and self.rng.random() < 0.5)
            text += self._zh_sentence(terms) if use_zh else self._en_sentence(terms)
        return text.strip(), terms, lang


def _query_text(terms: list[str], rng: np.random.Generator) -> str:
    k = min(len(terms), int(rng.integers(2, 6)))
    picked = [terms[i] for i in sorted(rng.choice(len(terms), size=k, replace=False).tolist())]
    # Chinese words are often typed without separators; half the queries do so.
    glue_zh = rng.random() < 0.5
    out = picked[0]
    for prev, word in itertools.pairwise(picked):
        both_zh = prev[0] >= "\u4e00" and word[0] >= "\u4e00"
        out += word if (both_zh and glue_zh) else " " + word
    return out


def generate(n_docs: int, n_queries: int = 1000, seed: int = 13) -> tuple[list[str], list[Query]]:
    """Build ``n_docs`` texts and ``n_queries`` queries sampled from them."""
    qrng = np.random.default_rng(seed + 1)
    targets = sorted(qrng.choice(n_docs, size=min(n_queries, n_docs), replace=False).tolist())
    gen = CorpusGenerator(seed)
    texts: list[str] = []
    sampled: dict[int, tuple[list[str], str]] = {}
    for i in range(n_docs):
        text, terms, lang = gen.doc()
        texts.append(text)
        pos = bisect.bisect_left(targets, i)
        if pos < len(targets) and targets[pos] == i:
            sampled[i] = (list(dict.fromkeys(terms)), lang)
    order = qrng.permutation(len(targets)).tolist()
    queries = []
    for j in order:
        doc = targets[j]
        terms, lang = sampled[doc]
        queries.append(Query(_query_text(terms, qrng), doc, lang))
    return texts, queries


if __name__ == "__main__":
    import sys

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    docs, qs = generate(n, n_queries=min(n, 5))
    for t in docs[:5]:
        print(t, "\n")
    for q in qs:
        print(q)
