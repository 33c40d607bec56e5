"""``clawkb eval DATASET --backend milvus``: the same evaluation, searched on Milvus.

A throw-away KB whose ``config.yaml`` points at a throw-away Milvus Lite file
(or at ``uri`` when given): indexing syncs every chunk — with the vectors
computed once by the local embedder — into the collection, and every query
of every mode is answered by Milvus. The local numbers come from the same
corpus, tokens and embedder, so the two reports compare like with like.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from clawkb.backends.milvus_schema import close_client
from clawkb.backends.settings import milvus_settings

if TYPE_CHECKING:
    from clawkb.evaluate.compare import Comparison


def compare_on_milvus(
    folder: str | Path,
    *,
    modes: Sequence[str] = ("lexical",),
    embedder: str = "e5-small",
    limit_queries: int | None = None,
    uri: str | None = None,
    collection: str = "clawkb_eval",
    options: dict[str, dict[str, Any]] | None = None,
) -> Comparison:
    """:func:`clawkb.evaluate.compare.compare_modes` with search on Milvus."""
    from clawkb.embed.base import get_embedder
    from clawkb.evaluate.compare import compare_modes

    dense = any(m != "lexical" for m in modes)
    with tempfile.TemporaryDirectory(prefix="clawkb-milvus-eval-") as tmp:
        home = Path(tmp) / "kb"
        home.mkdir()
        backend = {
            "kind": "milvus",
            "uri": uri or str(Path(tmp) / "eval.db"),
            "collection": collection,
            "dense": dense,
            "batch": 1000,
        }
        conf: dict[str, Any] = {"backend": backend}
        if dense:
            conf["embedding"] = embedder
        (home / "config.yaml").write_text(yaml.safe_dump(conf), encoding="utf-8")
        settings = milvus_settings(backend, home, "eval")
        try:
            return compare_modes(
                folder,
                modes=modes,
                embedder=get_embedder(embedder) if dense else None,
                limit_queries=limit_queries,
                kb_home=home,
                options=options,
            )
        finally:
            if uri is None:
                close_client(settings)
