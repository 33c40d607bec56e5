"""reStructuredText through docutils: structure, spans, tables, roles, links, safety."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawkb.errors import ParseError
from clawkb.kb import KnowledgeBase
from clawkb.parsers.registry import default_registry
from clawkb.parsers.rst import RstParser

SECRET = "SECRET_FROM_OUTSIDE_THE_ROOT"

RST = """\
=============
GPIO & RTC IO
=============

:link_to_translation:`zh_CN:[中文]`

Intro with :ref:`the config section <gpio-config>` and :c:func:`gpio_config`
and :doc:`../uart/index` on a second line.

.. _gpio-config:

IO Configuration
----------------

- first item
- second item
  continued

::

    plain literal

.. code-block:: c

    int main(void)
    {
        return 0;
    }

+------+----------+
| Pin  | Function |
+======+==========+
| IO4  | LED      |
+------+----------+
| IO18 | Button   |
+------+----------+

=====  =====
Name   Value
=====  =====
alpha  1
beta   2
=====  =====

.. warning::

   Do not drive IO6 to IO11.

.. only:: esp32

   Only on the ESP32 target.

.. include:: {include}

.. raw:: html

   <script>alert(1)</script>

.. doxygenfunction:: gpio_set_level

.. espidf-unknown-directive:: something
   :odd-option: yes

   Body of an unknown directive stays searchable.

.. mermaid::

   graph TD; A-->B

Sleep Modes
^^^^^^^^^^^

.. list-table:: Pin map
   :header-rows: 1
   :widths: 10 20

   * - Pin
     - Mode
   * - IO4
     - Deep-sleep

.. csv-table::
   :header: "Rail", "Volts"

   "VDD3P3", 3.3
   "VDD_SPI", 1.8

Term
   A definition.

.. toctree::
   :maxdepth: 1

   gpio-etm
   Dedicated GPIO <dedic_gpio>
"""


def _doc(tmp_path: Path) -> tuple[object, list[str], str]:
    outside = tmp_path / "outside.txt"
    outside.write_text(SECRET, encoding="utf-8")
    text = RST.replace("{include}", outside.as_posix())
    return RstParser().parse(text.encode(), "docs/gpio.rst"), text.split("\n"), text


def test_sections_spans_code_and_tables(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    doc, lines, _ = _doc(tmp_path)
    assert doc.title == "GPIO & RTC IO"
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # docutils never writes to the terminal
    by_text = {s.text.split("\n")[0]: s for s in doc.slices}
    head = by_text["IO Configuration"]
    assert head.heading_path == ("GPIO & RTC IO", "IO Configuration")
    assert (head.line_start, head.line_end) == (12, 13)
    top = by_text["GPIO & RTC IO"]
    assert (top.line_start, top.line_end) == (1, 3)  # overline, title, underline
    intro = next(s for s in doc.slices if s.text.startswith("Intro"))
    assert intro.text == (
        "Intro with the config section and gpio_config\nand ../uart/index on a second line."
    )
    assert (intro.line_start, intro.line_end) == (7, 8)
    assert [(ln.kind, ln.target) for ln in intro.links] == [
        ("ref", "gpio-config"),
        ("url", "../uart/index.rst"),
    ]
    items = next(s for s in doc.slices if s.kind == "list" and "first item" in s.text)
    assert items.text == "- first item\n- second item\n  continued"
    assert (items.line_start, items.line_end) == (15, 17)
    code = next(s for s in doc.slices if s.language == "c")
    assert code.kind == "code" and code.text.startswith("int main(void)")
    assert lines[code.line_start - 1].strip() == "int main(void)"
    assert lines[code.line_end - 1].strip() == "}"
    literal = next(s for s in doc.slices if s.text == "plain literal")
    assert literal.kind == "code" and lines[literal.line_start - 1].strip() == "plain literal"
    tables = [s for s in doc.slices if s.kind == "table"]
    assert [t.text.split("\n")[0] for t in tables] == [
        "| Pin | Function |",
        "| Name | Value |",
        "| Pin | Mode |",
        "| Rail | Volts |",
    ]
    assert "| IO18 | Button |" in tables[0].text and "| beta | 2 |" in tables[1].text
    assert "| VDD_SPI | 1.8 |" in tables[3].text
    for table in tables:  # spans are the table's own lines
        span = lines[table.line_start - 1 : table.line_end]
        assert span[0].strip() and span[-1].strip()
        assert table.line_end - table.line_start < 12
    assert lines[tables[0].line_start - 1].startswith("+------+")
    assert lines[tables[0].line_end - 1].startswith("+------+")
    assert lines[tables[2].line_start - 1].startswith(".. list-table::")
    assert tables[2].heading_path[-1] == "Sleep Modes"
    for sl in doc.slices:
        assert 1 <= sl.line_start <= sl.line_end <= len(lines), sl


def test_directives_roles_and_safety(tmp_path: Path) -> None:
    doc, _, _ = _doc(tmp_path)
    text = "\n".join(s.text for s in doc.slices)
    assert SECRET not in text  # include never reads a file
    assert "alert(1)" not in text  # raw is disabled
    assert "Warning: Do not drive IO6 to IO11." in text
    assert "Only on the ESP32 target." in text
    assert "Body of an unknown directive stays searchable." in text
    assert "odd-option" not in text and "link_to_translation" not in text
    assert "zh_CN:[中文]" in text  # an unknown role keeps its text
    mermaid = next(s for s in doc.slices if s.language == "mermaid")
    assert mermaid.kind == "code"
    toc = next(s for s in doc.slices if "Dedicated GPIO" in s.text)
    assert [ln.target for ln in toc.links] == ["gpio-etm.rst", "dedic_gpio.rst"]
    assert "gpio-config" in doc.metadata["labels"]


def test_registered_and_text_no_longer_claims_rst() -> None:
    parser = default_registry().for_path("a.rst")
    assert parser is not None and parser.name == "rst"


@pytest.mark.parametrize(
    "source",
    [
        "Title\n=====\n\n" + "".join("  " * i + f"- level {i}\n\n" for i in range(150)),
        ".. note::\n\n" + "".join("   " * i + ".. note::\n\n" for i in range(1, 120)) + "x\n",
        "Bad\n===\n\n+--+\n| broken |\n\n.. list-table::\n\n   * - a\n   * - b\n     - c\n",
        "\n".join(f"{'=' * (i % 7 + 3)}\nT{i}\n{'-' * 40}" for i in range(200)),
        ".. csv-table::\n   :file: /etc/passwd\n\n.. csv-table::\n   :url: http://127.0.0.1:9/x\n",
    ],
)
def test_hostile_rst_is_one_error_or_a_document(source: str) -> None:
    try:
        doc = RstParser().parse(source.encode(), "h.rst")
    except ParseError as exc:
        assert exc.path == "h.rst" and "\n" not in str(exc)
        return
    for sl in doc.slices:
        assert 1 <= sl.line_start <= sl.line_end
    assert "root:" not in "\n".join(s.text for s in doc.slices)


def test_huge_grid_table_is_parsed_with_its_header() -> None:
    rows = "".join(f"| r{i:<4} | v{i:<6} |\n+-------+---------+\n" for i in range(3000))
    source = "+-------+---------+\n| Reg   | Value   |\n+=======+=========+\n" + rows
    doc = RstParser().parse(source.encode(), "big.rst")
    table = next(s for s in doc.slices if s.kind == "table")
    assert table.text.startswith("| Reg | Value |") and "| r2999 | v2999 |" in table.text


def test_section_titles_are_found_with_their_heading_path(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "uart").mkdir(parents=True)
    (docs / "api").mkdir()
    doc_text = RST.replace(".. include:: {include}\n", "")
    (docs / "api" / "gpio.rst").write_text(doc_text, encoding="utf-8")
    (docs / "uart" / "index.rst").write_text(
        "UART\n====\n\nSee :ref:`gpio-config`.\n\nBaud Rates\n----------\n\n"
        "The console runs at 115200 baud by default.\n",
        encoding="utf-8",
    )
    with KnowledgeBase.open(tmp_path / "kb", create=True) as kb:
        report = kb.index([docs])
        assert report.failed == 0 and report.added == 2
        for title, file in (("Sleep Modes", "gpio.rst"), ("Baud Rates", "index.rst")):
            hit = kb.search(title, mode="lexical", limit=3).hits[0]
            assert hit.anchor.heading_path[-1] == title and hit.anchor.path.endswith(file)
        from clawkb.knowledge.links import Resolver, all_links

        rows = {(r.kind, r.text): r for r in all_links(kb.conn, Resolver(kb.conn))}
        assert rows[("ref", "gpio-config")].target.endswith("gpio.rst")
        assert not rows[("ref", "gpio-config")].broken
        assert rows[("markdown", "../uart/index")].target.endswith("uart/index.rst")
        assert not rows[("markdown", "../uart/index")].broken


def test_api_directives_keep_the_name_they_document() -> None:
    """Breathe/autodoc directives pull an entity's docs in by name: the generated text
    is not in the source, so the name is the one place the page spells it."""
    src = """\
Commands
========

.. doxygendefine:: ESP_BT_VS_DTM_RX_TEST_START_OCF
.. doxygenfunction:: esp_vhci_host_send_packet
.. autofunction:: mymodule.do_thing

.. image:: ../_static/diagram.png
"""
    doc = RstParser().parse(src.encode(), "api/bt_vhci.rst")
    text = "\n".join(s.text for s in doc.slices)
    for name in (
        "ESP_BT_VS_DTM_RX_TEST_START_OCF",
        "esp_vhci_host_send_packet",
        "mymodule.do_thing",
    ):
        assert name in text
    assert "diagram.png" not in text  # a file argument is not a name


def test_directive_body_without_blank_line_is_kept() -> None:
    """A directive that takes no argument, written with its body right under it:
    docutils reads the body as the argument, and it must not vanish."""
    src = """\
Config
======

.. list::
    -  :cpp:member:`cfg::clk_src` Sets the clock source.
    -  :cpp:member:`cfg::data_width` Not greater than {IDF_TARGET_SOC_X_MAX_DATA_WIDTH}.

After the list.
"""
    doc = RstParser().parse(src.encode(), "api/parlio_tx.rst")
    body = next(s for s in doc.slices if "clk_src" in s.text)
    assert "IDF_TARGET_SOC_X_MAX_DATA_WIDTH" in body.text
    assert body.line_start == 4  # the directive's line, as for any directive
    assert any(s.text == "After the list." for s in doc.slices)
