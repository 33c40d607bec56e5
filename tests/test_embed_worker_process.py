"""The server embeds in a child process: the model loads there, and searches stay
lexical (with a warning) until it is ready instead of waiting for the load."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

import numpy as np
import pytest

from clawkb.embed.base import get_embedder
from clawkb.embed.run import embed_kb, kb_embedder
from clawkb.embed.worker import WorkerEmbedder, worker_embedder
from clawkb.kb import KnowledgeBase
from clawkb.server.runtime import Runtime
from plugin_helpers import install_dist

#: An embedder whose model load (``warm``) waits until a gate file exists.
GATED = """
import hashlib
import os
import time

import numpy as np

from clawkb.embed.base import Embedder, l2_normalize


class GatedEmbedder(Embedder):
    name = "gated-fake"
    dim = 16

    def __init__(self, gate):
        self.gate = gate

    def warm(self):
        deadline = time.monotonic() + 120
        while not os.path.exists(self.gate) and time.monotonic() < deadline:
            time.sleep(0.02)

    def _vec(self, text):
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        return np.frombuffer(digest[: self.dim], np.uint8).astype(np.float32) + 1.0

    def embed_documents(self, texts):
        return l2_normalize(np.stack([self._vec(t) for t in texts]))

    def embed_query(self, text):
        return self.embed_documents([text])[0]


def factory(options):
    return GatedEmbedder(**options)
"""


def test_the_worker_embeds_as_the_model_does_here() -> None:
    pytest.importorskip("static_model", reason="needs the dense extra (tokenlearn-static-model)")
    here = get_embedder("static")
    worker = worker_embedder("static", {})
    assert isinstance(worker, WorkerEmbedder)
    try:
        assert worker.signature() == here.signature()
        assert worker.wait_ready(120) and not worker.loading()
        texts = ["the uart driver", "DDR4 阻抗 50 ohm", ""]
        np.testing.assert_allclose(
            worker.embed_documents(texts), here.embed_documents(texts), rtol=1e-5, atol=1e-6
        )
        np.testing.assert_allclose(
            worker.embed_queries(["spi flash"]), here.embed_queries(["spi flash"]), atol=1e-6
        )
        assert worker.embed_documents([]).shape == (0, here.dim)
        proc = worker._proc
    finally:
        worker.close()
    assert proc is not None and proc.poll() is not None  # the child is gone


def test_a_model_that_cannot_load_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_dist(
        tmp_path / "site", "gatedembed", "0.1", {"gatedembed": GATED},
        "[clawkb.embedders]\ngated-fake = gatedembed:factory\n",
    )  # fmt: skip
    # on this process's path only: the child cannot import the plugin
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    worker = worker_embedder("gated-fake", {"gate": str(tmp_path / "gate")})
    try:
        assert not worker.wait_ready(60) and not worker.loading()
        with pytest.raises(Exception) as info:
            worker.embed_documents(["x"])
        assert "gated-fake" in str(info.value) and "\n" not in str(info.value)
    finally:
        worker.close()


def test_searches_do_not_wait_for_the_model_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = install_dist(
        tmp_path / "site", "gatedembed", "0.1", {"gatedembed": GATED},
        "[clawkb.embedders]\ngated-fake = gatedembed:factory\n",
    )  # fmt: skip
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    home, docs, gate = tmp_path / "kb", tmp_path / "docs", tmp_path / "gate"
    home.mkdir()
    docs.mkdir()
    (home / "config.yaml").write_text(
        f"embedding:\n  model: gated-fake\n  options:\n    gate: {gate.as_posix()!r}\n", "utf-8"
    )
    (docs / "a.md").write_text("# Alpha\n\nthe uart driver of the alpha board\n", "utf-8")
    (docs / "b.md").write_text("# Beta\n\nthe spi flash of the beta board\n", "utf-8")
    with KnowledgeBase.open(home, create=True) as kb:
        kb.index([docs])
        gate.touch()
        embed_kb(kb)  # vectors made in this process (the gate is open)
    gate.unlink()

    runtime = Runtime(home)
    pool = concurrent.futures.ThreadPoolExecutor(2)
    try:
        # the model's load in the worker is held at the gate: the search answers anyway
        res = pool.submit(runtime.read_sync, lambda kb: kb.search("uart driver")).result(60)
        assert res.hits and res.hits[0].anchor.path.endswith("a.md")
        assert any("still loading" in w for w in res.warnings), res.warnings
        embedder = runtime.read_sync(kb_embedder)
        assert isinstance(embedder, WorkerEmbedder) and embedder.loading()
        assert not any(st["stage"] == "dense" for st in res.stages)

        gate.touch()  # the load finishes: dense joins in
        assert embedder.wait_ready(60)
        res = runtime.read_sync(lambda kb: kb.search("spi flash", mode="dense"))
        assert not any("loading" in w for w in res.warnings), res.warnings
        assert any(st["stage"] == "dense" and st["status"] == "ok" for st in res.stages)
    finally:
        pool.shutdown()
        runtime.close()
    assert embedder._proc is None  # stopped with the runtime
