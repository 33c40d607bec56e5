"""Without an optional extra, clawkb names the extra to install.

A ``sitecustomize`` module on ``PYTHONPATH`` makes the PDF libraries
unimportable in a real ``clawkb`` subprocess (``sys.modules[name] = None`` is
how Python itself marks a module as not importable), as on an installation
without ``clawkb[pdf]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.pdf_samples import text_pdf

BLOCK = """import sys
for name in ("pypdfium2", "pypdfium2.raw", "pdfplumber"):
    sys.modules[name] = None
"""


def _clawkb(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "no-pdf-extra"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCK)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "clawkb.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_parsers_lists_the_extra_to_install(tmp_path: Path) -> None:
    res = _clawkb(tmp_path, "parsers")
    assert res.returncode == 0, res.stderr
    (pdf,) = [line for line in res.stdout.splitlines() if line.startswith("pdf ")]
    assert ".pdf" in pdf and "not installed: pip install 'clawkb[pdf]'" in pdf
    others = [line for line in res.stdout.splitlines() if not line.startswith("pdf ")]
    assert others and not any("not installed" in line for line in others)
    rows = json.loads(_clawkb(tmp_path, "parsers", "--json").stdout)
    by_name = {r["name"]: r for r in rows}
    assert by_name["pdf"]["missing"] == "not installed: pip install 'clawkb[pdf]'"
    assert by_name["markdown"]["missing"] is None


def test_a_pdf_without_the_extra_names_it(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "manual.pdf").write_bytes(text_pdf([["Clock tree setup"]]))
    (docs / "notes.md").write_text("# Notes\n\nplain notes\n")
    res = _clawkb(tmp_path, "--kb", str(tmp_path / "kb"), "index", str(docs))
    assert res.returncode == 3, res.stderr  # done, with a failure
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("failed: ")]
    assert line.startswith(f"failed: {(docs / 'manual.pdf').as_posix()}: ")
    assert "pip install 'clawkb[pdf]'" in line
    assert "added 1" in res.stdout
