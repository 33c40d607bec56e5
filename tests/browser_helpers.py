"""Debian's chromium under Playwright, shared by the page's browser tests (one browser per
module: launching one costs about a second)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).parent / "artifacts"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip


def require_chromium() -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(
            "Debian's chromium is not installed (make test installs it: apt-get install chromium)",
            allow_module_level=True,
        )


@contextmanager
def launched() -> Iterator[Any]:
    """A headless chromium; screenshots go to tests/artifacts/."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()
