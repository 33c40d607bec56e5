"""Parser discovery through real entry points (installed and in a temp site dir)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import ClassVar

import pytest

from clawkb.parsers.markdown import MarkdownParser
from clawkb.parsers.registry import GROUP, ParserRegistry, default_registry
from clawkb.parsers.text import TextParser
from clawkb.types import ParsedDocument, Slice

PLUGIN_MODULE = """
from clawkb.types import ParsedDocument, Slice

class FancyMarkdown:
    name = "fancy-md"
    extensions = (".md", ".fancy")
    mime_types = ("text/markdown",)

    def parse(self, data, path):
        return ParsedDocument(slices=(Slice(data.decode(), 1, 1),), title="fancy")

class NotAParser:
    name = "nope"
"""


@pytest.fixture
def plugin_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A real installed-looking distribution ``fakeplug 1.2`` on sys.path."""
    site = tmp_path / "site"
    dist = site / "fakeplug-1.2.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplug\nVersion: 1.2\n")
    (dist / "entry_points.txt").write_text(
        f"[{GROUP}]\n"
        "fancy = fakeplug_mod:FancyMarkdown\n"
        "broken = fakeplug_missing_mod:Parser\n"
        "nope = fakeplug_mod:NotAParser\n"
    )
    (site / "fakeplug_mod.py").write_text(PLUGIN_MODULE)
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop("fakeplug_mod", None)


def test_builtins_come_from_entry_points() -> None:
    names = {ep.name for ep in entry_points(group=GROUP)}
    assert {"markdown", "text"} <= names
    registry = ParserRegistry()
    infos = {info.name: info for info in registry.all()}
    assert infos["markdown"].origin == "built-in"
    assert infos["markdown"].extensions == (".md", ".markdown", ".mdx")
    assert infos["text"].origin == "built-in"
    assert isinstance(registry.for_path("docs/README.MD"), MarkdownParser)
    assert isinstance(registry.for_path("/var/log/boot.log"), TextParser)
    assert isinstance(registry.for_mime("text/plain; charset=utf-8"), TextParser)
    assert isinstance(registry.by_name("markdown"), MarkdownParser)
    assert registry.for_path("image.png") is None
    assert registry.for_path("Makefile") is None
    assert registry.errors() == []


def test_empty_entry_point_list_means_no_parsers() -> None:
    registry = ParserRegistry([])
    assert registry.all() == []
    assert registry.for_path("a.md") is None


def test_default_registry_is_cached() -> None:
    assert default_registry() is default_registry()
    assert default_registry().for_path("x.txt") is not None


def test_broken_entry_point_is_recorded_not_raised() -> None:
    eps = [
        EntryPoint("missing", "clawkb_no_such_module:Parser", GROUP),
        EntryPoint("text", "clawkb.parsers.text:TextParser", GROUP),
    ]
    registry = ParserRegistry(eps)
    (error,) = registry.errors()
    assert error.name == "missing"
    assert "ModuleNotFoundError" in (error.error or "")
    assert isinstance(registry.for_path("a.txt"), TextParser)


def test_third_party_plugin_overrides_builtin(plugin_site: Path) -> None:
    registry = ParserRegistry()
    infos = {info.name: info for info in registry.all()}
    assert infos["fancy-md"].origin == "fakeplug 1.2"
    assert infos["markdown"].ok  # the replaced built-in is still listed
    parser = registry.for_path("notes.md")
    assert parser is not None and parser.name == "fancy-md"
    assert registry.for_path("x.fancy") is parser
    assert isinstance(registry.for_path("x.markdown"), MarkdownParser)
    doc = parser.parse(b"hello", "notes.md")
    assert doc.title == "fancy"


def test_broken_plugins_of_a_distribution_are_listed(plugin_site: Path) -> None:
    errors = {info.name: info for info in ParserRegistry().errors()}
    assert set(errors) == {"broken", "nope"}
    assert errors["broken"].origin == "fakeplug 1.2"
    assert "fakeplug_missing_mod" in (errors["broken"].error or "")
    assert "not a parser" in (errors["nope"].error or "")


class _UpperText:
    name: ClassVar[str] = "upper"
    extensions: ClassVar[tuple[str, ...]] = (".TXT",)
    mime_types: ClassVar[tuple[str, ...]] = ()

    def parse(self, data: bytes, path: str) -> ParsedDocument:
        return ParsedDocument(slices=(Slice(data.decode().upper(), 1, 1),))


def test_runtime_registration_wins_and_lowercases() -> None:
    registry = ParserRegistry()
    registry.register(_UpperText())
    parser = registry.for_path("A.txt")
    assert parser is not None and parser.name == "upper"
    assert registry.all()[-1].origin == "runtime"
    assert registry.all()[-1].extensions == (".txt",)
