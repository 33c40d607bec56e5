"""A segment damaged after it was opened (so only a search can find it) is handed to
a writer, which checksums every file and rebuilds the index from the store; the
search that found it waits and answers from the repaired generation. Readers never
write: in a terminal the repair runs under the write lock on a thread of its own,
under `clawkb serve` on the server's writer thread."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clawkb import KnowledgeBase
from clawkb.maintenance.doctor import run_doctor
from safety_helpers import uart_notes_kb
from server_helpers import serving

QUERIES = ("uart baud", "ddr4 impedance ohm", "pull ups", "uart3 baud", "impedance ohm")


def _damage_in_place(home: Path) -> Path:
    """Point every posting block of the segment past its packed bytes, writing into
    the mapped file itself (same inode and size: what an open reader already holds)."""
    (seg,) = sorted((home / "index" / "lexical").glob("seg-*"))
    path = seg / "blk_pos.npy"
    if not path.exists():
        pytest.skip("segments without packed postings (written without the native build)")
    arr = np.load(path)
    bad = np.full_like(arr, 1 << 30)
    with open(path, "r+b") as fh:
        fh.seek(path.stat().st_size - arr.nbytes)
        fh.write(bad.tobytes())
    return seg


def test_a_reader_hands_the_damage_to_a_writer_and_answers(tmp_path: Path) -> None:
    home = uart_notes_kb(tmp_path)
    with KnowledgeBase.open(home) as kb:
        assert kb.search(QUERIES[0], limit=3).hits  # the segment is mapped now
        seg = _damage_in_place(home)
        repaired = []
        for q in QUERIES:
            res = kb.search(q, limit=3)
            assert res.hits, q
            repaired += [w for w in res.warnings if w.startswith("repaired:")]
        assert repaired and str(seg) in repaired[0] and "\n" not in repaired[0]
        assert not seg.exists() or seg.name not in kb.lexical.manifest.segments
    assert run_doctor(home).healthy


def test_under_serve_the_writer_rebuilds_and_the_search_answers(tmp_path: Path) -> None:
    home = uart_notes_kb(tmp_path)
    with serving(home) as s:
        assert s.ok("GET", "/api/v1/search", params={"q": QUERIES[0]})["hits"]
        seg = _damage_in_place(home)
        warnings = []
        for q in QUERIES[1:]:
            body = s.ok("GET", "/api/v1/search", params={"q": q, "limit": 3})
            assert body["hits"], q
            warnings += body.get("warnings", [])
        assert any(w.startswith("repaired:") and str(seg) in w for w in warnings), warnings
        assert s.ok("GET", "/api/v1/search", params={"q": "pull ups"})["hits"]
        assert not any("Traceback" in line for line in s.lines), "".join(s.lines)
    assert run_doctor(home).healthy
