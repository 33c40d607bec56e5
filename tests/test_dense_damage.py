"""Damaged dense vector files are caught, never searched (issue 20, item 4).

A real KB embedded with the real static model; its dense vector files (the
cache ``index/dense/<model>/``) are damaged on disk: 4 KB XORed inside the
vectors, a truncated ids file. ``doctor`` names the file, a search falls back
to lexical results with a warning (no absurd score), and ``doctor --repair``
rebuilds the files from the store's vectors.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clawkb.embed.run import embed_kb
from clawkb.kb import KnowledgeBase
from clawkb.maintenance.doctor import run_doctor
from safety_helpers import make_corpus, unique

pytest.importorskip("static_model")
CLAWKB = str(Path(sys.executable).parent / "clawkb")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dense")
    make_corpus(root / "notes", 40)
    home = root / "kb"
    home.mkdir()
    (home / "config.yaml").write_text("embedding: static\n")
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([root / "notes"])
        embed_kb(kb)
        assert kb.search(unique(5), mode="dense").hits  # the first dense search writes the cache
    return home


@pytest.fixture
def home(template: Path, tmp_path: Path) -> Path:
    shutil.copytree(template, tmp_path / "kb")
    return tmp_path / "kb"


def _dense_file(home: Path, name: str) -> Path:
    (path,) = (home / "index" / "dense").glob(f"*/{name}")
    return path


def _search(home: Path, mode: str) -> dict:
    with KnowledgeBase.open(home) as kb:
        return kb.search(unique(7), mode=mode).to_dict()


def test_xor_inside_the_vectors_is_reported_and_repaired(home: Path) -> None:
    sound = _search(home, "dense")
    vecs = _dense_file(home, "vecs.npy")
    data = bytearray(vecs.read_bytes())
    assert len(data) > 12 << 10
    for i in range(8 << 10, 12 << 10):
        data[i] ^= 0x5A
    vecs.write_bytes(bytes(data))

    report = run_doctor(home)
    bad = [f for f in report.findings if not f.ok]
    assert not report.healthy and any("vecs.npy" in f.message for f in bad), report.findings
    assert any("checksum" in f.message for f in bad)

    for mode in ("dense", "hybrid"):
        res = _search(home, mode)
        assert res["mode"] == "lexical", res["mode"]
        assert any("vecs.npy" in w and "doctor --repair" in w for w in res["warnings"])
        assert res["hits"][0]["path"].endswith("doc007.md")
        assert all(abs(h["score"]) < 1e6 for h in res["hits"])

    fixed = run_doctor(home, repair=True)
    assert fixed.healthy and any(f.repaired for f in fixed.findings), fixed.findings
    assert run_doctor(home).healthy
    res = _search(home, "dense")
    assert res["mode"] == "dense" and not res["warnings"]
    assert [h["path"] for h in res["hits"]] == [h["path"] for h in sound["hits"]]
    assert all(-1.01 <= h["score"] <= 1.01 for h in res["hits"])


def test_a_truncated_ids_file_is_one_clear_line(home: Path) -> None:
    ids = _dense_file(home, "ids.npy")
    ids.write_bytes(ids.read_bytes()[:100])
    out = subprocess.run([CLAWKB, "--kb", str(home), "doctor"], capture_output=True, text=True)
    assert out.returncode == 1 and "ids.npy" in out.stdout, out.stdout
    out = subprocess.run(
        [CLAWKB, "--kb", str(home), "search", unique(7), "--mode", "dense"],
        capture_output=True,
        text=True,
    )  # lexical results, and a warning naming the file
    assert out.returncode == 0 and "doc007.md" in out.stdout, out.stdout + out.stderr
    assert "ids.npy" in out.stderr and "Traceback" not in out.stderr, out.stderr
    fixed = subprocess.run(
        [CLAWKB, "--kb", str(home), "doctor", "--repair"], capture_output=True, text=True
    )
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "Aborted" not in fixed.stdout + fixed.stderr
    assert _search(home, "dense")["mode"] == "dense"
