"""A real `embed` run in its own process, with a slow embedder behind the Embedder interface.

Usage: python embed_worker.py HOME GATE_FILE — the embedder answers its first
batch at once, then waits for GATE_FILE to exist before each later batch, so a
test can act while the run is mid-way.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from clawkb.embed.run import embed_kb
from clawkb.embed.static import StaticEmbedder
from clawkb.kb import KnowledgeBase


class GatedEmbedder(StaticEmbedder):
    """The real static model; every batch after the first waits for the gate file."""

    def __init__(self, gate: Path) -> None:
        super().__init__()
        self.gate = gate
        self.calls = 0

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.calls > 1:
            deadline = time.monotonic() + 120
            while not self.gate.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        return super().embed_documents(texts)


if __name__ == "__main__":
    home, gate = sys.argv[1], Path(sys.argv[2])
    with KnowledgeBase.open(home) as kb:
        report = embed_kb(kb, embedder=GatedEmbedder(gate), batch=8)
    print(report.embedded, report.total)
