"""A third-party parser package, installed by pip, indexes a custom format through the CLI."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

PLUGIN = '''"""A parser for .pinmap files: one "PIN = FUNCTION" per line."""
from clawkb.types import ParsedDocument, Slice


class PinmapParser:
    name = "pinmap"
    extensions = (".pinmap",)
    mime_types = ("text/x-pinmap",)

    def parse(self, data, path):
        lines = data.decode("utf-8").splitlines()
        slices = []
        for number, line in enumerate(lines, start=1):
            if "=" in line:
                pin, func = (part.strip() for part in line.split("=", 1))
                slices.append(Slice(f"{pin} is {func}", number, number, ("pins", pin)))
        return ParsedDocument(slices=tuple(slices), title="pin map")
'''


def _wheel(folder: Path) -> Path:
    """Build a real wheel (PEP 427 layout) for ``tinyplug 0.3`` with the entry point."""
    dist = "tinyplug-0.3.dist-info"
    files = {
        "tinyplug.py": PLUGIN,
        f"{dist}/METADATA": "Metadata-Version: 2.1\nName: tinyplug\nVersion: 0.3\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist}/entry_points.txt": "[clawkb.parsers]\npinmap = tinyplug:PinmapParser\n",
    }
    record = []
    for name, text in files.items():
        digest = (
            base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        )
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    wheel = folder / "tinyplug-0.3-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return wheel


def _clawkb(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clawkb.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_pip_installed_plugin_is_listed_and_indexes(tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(_wheel(tmp_path)),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    assert (target / "tinyplug-0.3.dist-info" / "entry_points.txt").exists()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH")])),
    }

    listed = _clawkb(env, "parsers", "--json")
    assert listed.returncode == 0, listed.stderr
    infos = {i["name"]: i for i in json.loads(listed.stdout)}
    assert infos["pinmap"]["origin"] == "tinyplug 0.3"
    assert infos["pinmap"]["extensions"] == [".pinmap"] and infos["pinmap"]["mime_types"] == [
        "text/x-pinmap"
    ]
    assert infos["xlsx"]["origin"] == "built-in" and ".xlsx" in infos["xlsx"]["extensions"]
    text = _clawkb(env, "parsers").stdout
    assert "tinyplug 0.3" in text and ".pinmap" in text

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "board.pinmap").write_text("PA5 = LD2_GREEN\nPC13 = B1_USER\n", encoding="utf-8")
    kb = str(tmp_path / "kb")
    indexed = _clawkb(env, "--kb", kb, "index", str(docs))
    assert indexed.returncode == 0 and "added 1" in indexed.stdout, indexed.stderr
    found = _clawkb(env, "--kb", kb, "search", "B1_USER", "--json")
    hit = json.loads(found.stdout)["hits"][0]
    assert hit["path"].endswith("board.pinmap") and hit["heading_path"] == ["pins", "PC13"]
    assert hit["line_start"] == 2

    # without the plugin on the path, the same file is skipped, not failed
    bare = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    skipped = _clawkb(bare, "--kb", str(tmp_path / "kb2"), "index", str(docs))
    assert "no parser for '.pinmap'" in skipped.stderr
