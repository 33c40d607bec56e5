"""Encoding detection on real bytes, written to and read back from files."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from clawkb.errors import DecodeError, UnsupportedFileError
from clawkb.text.decode import decode_source, decode_text, looks_binary

CHINESE = "这是一个中文文档，用于测试编码检测。\n第二行：引脚配置与时钟设置。\n"
GERMAN = "Größe und Maße für den Prozessor. Die Spannung beträgt 3,3 V.\n"
FRENCH = "café crème, naïve résumé.\nÇa va? “quoted” — 25°C ±5%\n"


def roundtrip(tmp_path: Path, data: bytes, name: str = "f.txt") -> bytes:
    """Write bytes to a real file and read them back, as ingest does."""
    path = tmp_path / name
    path.write_bytes(data)
    return path.read_bytes()


def test_plain_utf8(tmp_path: Path) -> None:
    data = roundtrip(tmp_path, "UART 波特率 115200\n".encode())
    assert decode_text(data, "f.txt") == ("UART 波特率 115200\n", "utf-8")


def test_utf8_bom_is_stripped(tmp_path: Path) -> None:
    data = roundtrip(tmp_path, codecs.BOM_UTF8 + "# 标题\n".encode())
    assert decode_text(data, "f.md") == ("# 标题\n", "utf-8-sig")


@pytest.mark.parametrize(
    ("bom", "codec"),
    [
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
    ],
)
def test_utf16_and_utf32_with_bom(tmp_path: Path, bom: bytes, codec: str) -> None:
    data = roundtrip(tmp_path, bom + "引脚 PA9\r\nline two\r\n".encode(codec))
    assert not looks_binary(data)  # full of NULs, but the BOM says it is text
    assert decode_text(data, "f.txt") == ("引脚 PA9\nline two\n", codec)


def test_gbk_chinese_is_decoded_as_gb18030(tmp_path: Path) -> None:
    data = roundtrip(tmp_path, CHINESE.encode("gbk"))
    assert decode_text(data, "f.txt") == (CHINESE, "gb18030")


def test_gb18030_only_characters(tmp_path: Path) -> None:
    text = "中文说明：𠀀字只在 GB18030 中有四字节编码，其余为常用字。"
    data = roundtrip(tmp_path, text.encode("gb18030"))
    assert decode_text(data, "f.txt") == (text, "gb18030")


@pytest.mark.parametrize("text", [GERMAN, FRENCH, "Größe"])
def test_latin1_is_not_mistaken_for_gb(tmp_path: Path, text: str) -> None:
    data = roundtrip(tmp_path, text.encode("cp1252"))
    decoded, encoding = decode_text(data, "f.txt")
    assert decoded == text.replace("\r\n", "\n")
    assert encoding == "cp1252"


def test_cyrillic_single_byte_falls_back_to_detection(tmp_path: Path) -> None:
    text = "Привет, мир! Это тестовый документ на русском языке."
    data = roundtrip(tmp_path, text.encode("cp1251"))
    decoded, encoding = decode_text(data, "f.txt")
    assert decoded == text
    assert encoding != "cp1252"


def test_newlines_are_normalised(tmp_path: Path) -> None:
    data = roundtrip(tmp_path, b"one\r\ntwo\rthree\nfour")
    text, _ = decode_text(data, "f.txt")
    assert text.split("\n") == ["one", "two", "three", "four"]


def test_undecodable_bytes_raise_decode_error(tmp_path: Path) -> None:
    data = roundtrip(tmp_path, bytes(range(0x80, 0x100)))
    with pytest.raises(DecodeError) as info:
        decode_text(data, "weird.txt")
    assert info.value.path == "weird.txt"
    assert "cannot decode" in info.value.reason


def test_binary_with_nul_bytes(tmp_path: Path) -> None:
    data = roundtrip(tmp_path, b"ELF\x02\x01\x01\x00\x00\x00" + b"x" * 100)
    assert looks_binary(data)
    with pytest.raises(UnsupportedFileError) as info:
        decode_source(data, "a.out")
    assert info.value.reason == "binary file, skipped"


def test_png_header_is_binary(tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06"
    assert looks_binary(roundtrip(tmp_path, png, "x.png"))


def test_many_control_characters_are_binary(tmp_path: Path) -> None:
    data = roundtrip(tmp_path, bytes([1, 2, 3, 4, 5, 6, 7]) * 10 + b"text" * 10)
    assert looks_binary(data)


def test_text_with_tabs_and_escape_codes_is_not_binary(tmp_path: Path) -> None:
    data = roundtrip(tmp_path, b"col1\tcol2\n\x1b[31mred\x1b[0m log line\n" * 20)
    assert not looks_binary(data)


def test_empty_file(tmp_path: Path) -> None:
    data = roundtrip(tmp_path, b"")
    assert not looks_binary(data)
    assert decode_source(data, "empty.txt") == ("", "utf-8")


DAMAGED = "温度传感器的校准步骤如下：先读取寄存器，再写入偏移量。\n第二行：引脚配置与时钟设置。\n"


@pytest.mark.parametrize("codec", ["gbk", "utf-8"])
@pytest.mark.parametrize("damage", ["stray 0xff", "stray 0x80", "cut character"])
def test_a_few_damaged_bytes_do_not_turn_chinese_into_mojibake(
    tmp_path: Path, codec: str, damage: str
) -> None:
    good = DAMAGED.encode(codec)
    if damage == "cut character":  # the last byte of "。" on the first line is lost
        cut = good.index("。".encode(codec)) + len("。".encode(codec)) - 1
        data = good[:cut] + good[cut + 1 :]
    else:
        at = len(DAMAGED[:4].encode(codec))  # between two characters
        data = good[:at] + bytes([0xFF if damage == "stray 0xff" else 0x80]) + good[at:]
    text, encoding = decode_text(roundtrip(tmp_path, data), "f.txt")
    assert encoding == ("gb18030" if codec == "gbk" else "utf-8")
    assert text.count("\ufffd") == 1
    assert text.replace("\ufffd", "") in (DAMAGED, DAMAGED.replace("。", "", 1))
    assert "第二行：引脚配置与时钟设置。" in text


def test_latin1_with_no_valid_multibyte_text_is_still_latin1(tmp_path: Path) -> None:
    data = roundtrip(tmp_path, "Größe und Maße, crème brûlée.\n".encode("cp1252"))
    assert decode_text(data, "f.txt")[1] == "cp1252"
