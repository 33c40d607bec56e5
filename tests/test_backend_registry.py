"""The KB facade imports no backend: a ``backend:`` kind is looked up in the
``clawkb.backends`` plugin group, which gives the source, the after-write sync
and the status (Milvus is the built-in ``milvus`` entry point)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from clawkb.errors import ConfigError
from clawkb.kb import KnowledgeBase
from clawkb.plugins import register, unregister
from clawkb.retrieve.source import LocalSource, Source


class Recording:
    """A backend that searches locally and records what the facade asked of it."""

    calls: ClassVar[list[str]] = []

    @classmethod
    def source(cls, kb: KnowledgeBase) -> Source:
        cls.calls.append("source")
        return LocalSource(kb)

    @classmethod
    def after_write(cls, kb: KnowledgeBase, report: Any) -> Any:
        cls.calls.append("after_write")
        report.warnings.append(("recording", "after write"))
        return report

    @classmethod
    def status(cls, kb: KnowledgeBase) -> dict[str, Any]:
        cls.calls.append("status")
        return {"kind": "recording"}


def _kb(tmp_path: Path, backend: str) -> Path:
    home = tmp_path / "kb"
    home.mkdir()
    (home / "config.yaml").write_text(f"backend: {backend}\n", encoding="utf-8")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "uart.md").write_text("# UART\n\nThe baud rate is 115200.\n", encoding="utf-8")
    return home


def test_a_backend_kind_plugs_in_through_the_registry(tmp_path: Path) -> None:
    home = _kb(tmp_path, "{kind: recording}")
    Recording.calls.clear()
    register("clawkb.backends", "recording", Recording)
    try:
        with KnowledgeBase.open(home, create=True) as kb:
            report = kb.index([tmp_path / "notes"])
            hits = kb.search("baud rate").hits
            status = kb.status()
    finally:
        unregister("clawkb.backends", "recording")
    assert ("recording", "after write") in report.warnings
    assert hits and hits[0].anchor.path.endswith("uart.md")
    assert status["backend"] == {"kind": "recording"}
    assert {"after_write", "source", "status"} <= set(Recording.calls)


def test_local_needs_no_plugin_and_an_unknown_kind_is_one_line(tmp_path: Path) -> None:
    home = _kb(tmp_path, "{kind: nope}")
    with (
        KnowledgeBase.open(home, create=True) as kb,
        pytest.raises(ConfigError, match=r"config\.yaml: unknown backend kind 'nope'"),
    ):
        kb.search("baud")
    (home / "config.yaml").write_text("backend: local\n", encoding="utf-8")
    with KnowledgeBase.open(home) as kb:
        kb.index([tmp_path / "notes"])
        assert kb.search("baud rate").hits
        assert kb.status()["backend"] == {"kind": "local"}
