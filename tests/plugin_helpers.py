"""Install a real distribution (dist-info + module) on a private path for subprocess tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SLOW_EMBEDDER = '''"""A deterministic embedder that takes its time (for progress / Ctrl-C tests)."""
import hashlib
import time

import numpy as np

from clawkb.embed.base import Embedder, l2_normalize


class SlowEmbedder(Embedder):
    name = "slow-fake"
    dim = 16
    prefix = "none"
    normalized = True

    def __init__(self, delay=0.2):
        self.delay = float(delay)

    def _vec(self, text):
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        return np.frombuffer(digest[: self.dim], np.uint8).astype(np.float32) + 1.0

    def embed_documents(self, texts):
        time.sleep(self.delay)
        return l2_normalize(np.stack([self._vec(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32))

    def embed_query(self, text):
        return l2_normalize(self._vec(text)[None, :])[0]


def factory(options):
    return SlowEmbedder(**options)
'''


def install_dist(
    site: Path, name: str, version: str, modules: dict[str, str], entry_points: str
) -> dict[str, str]:
    """Write ``name-version.dist-info`` + modules into ``site``; env with it on PYTHONPATH."""
    dist = site / f"{name}-{version}.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(entry_points, encoding="utf-8")
    for module, text in modules.items():
        (site / f"{module}.py").write_text(text, encoding="utf-8")
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def install_slow_embedder(site: Path) -> dict[str, str]:
    return install_dist(
        site,
        "slowembed",
        "0.1",
        {"slowembed": SLOW_EMBEDDER},
        "[clawkb.embedders]\nslow-fake = slowembed:factory\n",
    )


def clawkb(
    env: dict[str, str], *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clawkb.cli.main", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
