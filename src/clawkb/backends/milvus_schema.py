"""The Milvus collection clawkb owns: fields, indexes, version and model check.

One row per chunk, keyed by its anchor. Collection properties record the
schema version, the tokenizer version and the dense model (``model_key`` and
dimension); opening a collection made with another of any of them is a clear
error, never a silent mix.
"""

from __future__ import annotations

import threading
from typing import Any

from clawkb.backends.settings import MilvusSettings
from clawkb.errors import BackendError, ConfigError, IndexError_
from clawkb.text import TOKENIZER_VERSION

#: Bump when fields change; a collection of another version is refused.
SCHEMA_VERSION = "2"  # 2: trust and domain (clawkb.knowledge)
NO_MODEL = "none"
#: Scalar fields returned with hits: a hit is built from these alone.
HIT_FIELDS = [
    "anchor",
    "source",
    "chunk_id",
    "path",
    "rel_path",
    "title",
    "heading",
    "ordinal",
    "line_start",
    "line_end",
    "page",
    "kind",
    "language",
    "doc_type",
    "board",
    "datasheet",
    "namespace",
    "trust",
    "domain",
    "mtime",
    "text",
]
_clients: dict[tuple[str, str, str], Any] = {}
_lock = threading.Lock()


def require_pymilvus() -> Any:
    import logging

    # Milvus Lite has no MVCC timestamp API; pymilvus logs that on every iterator.
    logging.getLogger("pymilvus.client.iterator.query_iterator").setLevel(logging.ERROR)
    # Milvus Lite's in-process gRPC server logs each RPC it lacks (version probes).
    logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
    try:
        import pymilvus
        from pymilvus.client import entity_helper
    except ImportError:
        raise ConfigError(
            "the milvus backend needs the milvus extra: pip install 'clawkb[milvus]'"
        ) from None
    # pymilvus checks each VARCHAR value of a row by iterating over its characters
    # (1 ms per 5 KB `terms` value: 80% of sync time). clawkb cuts every string to
    # its field's limit itself (milvus_rows), so that check is switched off.
    entity_helper.CHECK_STR_ARRAY = False
    return pymilvus


def memoize_lite_term_hash() -> None:
    """Milvus Lite runs in this process and hashes every analyzed word byte by byte in
    Python (FNV-1a): 60% of its insert time for surrogate words (measured with a stack
    sampler, bench/milvus_scale.py). Words repeat across chunks, so the same function
    behind a cache returns the same ids at a fraction of the cost."""
    import functools

    try:
        from milvus_lite.analyzer import protocol
    except ImportError:
        return
    fn = protocol.term_to_id
    if not hasattr(fn, "cache_info"):
        protocol.term_to_id = functools.lru_cache(maxsize=1 << 20)(fn)


def client(s: MilvusSettings) -> Any:
    """One shared client per address (Milvus Lite allows one process per file)."""
    key = (s.uri, s.token, s.db)
    with _lock:
        c = _clients.get(key)
        if c is None:
            pm = require_pymilvus()
            if s.is_lite:
                memoize_lite_term_hash()
            kwargs: dict[str, Any] = {"uri": s.uri}
            if s.token:
                kwargs["token"] = s.token
            if s.db:
                kwargs["db_name"] = s.db
            try:
                c = pm.MilvusClient(**kwargs)
            except Exception as exc:
                raise BackendError(f"cannot open Milvus at {s.uri}: {_short(exc)}") from exc
            _clients[key] = c
        return c


def close_client(s: MilvusSettings) -> None:
    """Close the client; for Milvus Lite also stop its in-process server, which frees
    the file for another process."""
    with _lock:
        c = _clients.pop((s.uri, s.token, s.db), None)
    if c is not None:
        c.close()
    if s.is_lite:
        try:
            from milvus_lite.server_manager import server_manager_instance
        except ImportError:
            return
        server_manager_instance.release_server(s.uri)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__


def properties(dim: int, model: str, signature: str = "") -> dict[str, str]:
    return {
        "clawkb.schema": SCHEMA_VERSION,
        "clawkb.tokenizer": TOKENIZER_VERSION,
        "clawkb.model": model,
        "clawkb.dim": str(dim),
        "clawkb.signature": signature,  # the embedder signature (JSON), for import
    }


def build_schema(pm: Any, dim: int) -> Any:
    dt = pm.DataType
    s = pm.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("anchor", dt.VARCHAR, is_primary=True, max_length=64)
    s.add_field("source", dt.VARCHAR, max_length=64)  # the ingesting KB's id
    s.add_field("chunk_id", dt.INT64)  # the chunk's id in that KB's store
    s.add_field("path", dt.VARCHAR, max_length=4096)
    s.add_field("rel_path", dt.VARCHAR, max_length=4096)  # relative to its root
    s.add_field("title", dt.VARCHAR, max_length=2048)
    s.add_field("heading", dt.VARCHAR, max_length=8192)  # JSON list
    for name in ("ordinal", "line_start", "line_end", "page"):
        s.add_field(name, dt.INT64)  # page -1 = none
    s.add_field("kind", dt.VARCHAR, max_length=32)
    s.add_field("language", dt.VARCHAR, max_length=64)
    s.add_field("doc_type", dt.VARCHAR, max_length=64)  # parser name
    s.add_field("board", dt.VARCHAR, max_length=256)
    s.add_field("datasheet", dt.BOOL)
    s.add_field("namespace", dt.VARCHAR, max_length=256)  # memory namespace, "" = document
    s.add_field("trust", dt.VARCHAR, max_length=64)  # trust tier, "" = none (knowledge)
    s.add_field("domain", dt.VARCHAR, max_length=256)  # knowledge domain, "" = none
    s.add_field("mtime", dt.DOUBLE)  # seconds
    s.add_field("meta", dt.JSON)  # document metadata (front matter)
    s.add_field("text", dt.VARCHAR, max_length=65535)
    s.add_field(
        "terms", dt.VARCHAR, max_length=65535, enable_analyzer=True,
        analyzer_params={"type": "standard"},
    )  # fmt: skip
    s.add_field("sparse", dt.SPARSE_FLOAT_VECTOR)
    if dim:
        s.add_field("dense", dt.FLOAT_VECTOR, dim=dim)
    s.add_function(
        pm.Function(
            name="bm25",
            function_type=pm.FunctionType.BM25,
            input_field_names=["terms"],
            output_field_names=["sparse"],
        )
    )
    return s


def index_params(c: Any, s: MilvusSettings, dim: int, k1: float, b: float) -> Any:
    ip = c.prepare_index_params()
    ip.add_index(
        "sparse",
        index_type="SPARSE_INVERTED_INDEX",
        metric_type="BM25",
        params={"bm25_k1": k1, "bm25_b": b},
    )
    if dim:
        if s.index == "HNSW":
            params = {"M": s.hnsw_m, "efConstruction": 200}
        else:
            params = {"nlist": s.ivf_nlist}
        ip.add_index("dense", index_type=s.index, metric_type="COSINE", params=params)
    for name in ("source", "path", "namespace", "board"):
        ip.add_index(name, index_type="INVERTED")
    return ip


def open_collection(
    s: MilvusSettings, *, dim: int = 0, model: str = NO_MODEL, create: bool = False,
    k1: float = 1.2, b: float = 0.75, signature: str = "",
) -> dict[str, str]:  # fmt: skip
    """Make sure the collection exists, is loaded and matches; return its properties.

    ``create`` makes a missing collection with ``dim``/``model`` (``dim`` 0 =
    lexical only). An existing one must carry this schema and tokenizer
    version, and — when ``model`` is given — the same dense model.
    """
    c = client(s)
    try:
        exists = c.has_collection(s.collection)
    except Exception as exc:
        raise BackendError(f"cannot reach Milvus at {s.uri}: {_short(exc)}") from exc
    if not exists:
        if not create:
            raise BackendError(
                f"Milvus at {s.uri} has no collection {s.collection!r}; run `clawkb sync` on an"
                " ingesting knowledge base first"
            )
        pm = require_pymilvus()
        c.create_collection(
            s.collection,
            schema=build_schema(pm, dim),
            index_params=index_params(c, s, dim, k1, b),
            properties=properties(dim, model, signature),
        )
    props = collection_properties(s)
    check_properties(s, props, model if create or model != NO_MODEL else None)
    c.load_collection(s.collection)
    return props


def collection_properties(s: MilvusSettings) -> dict[str, str]:
    info = client(s).describe_collection(s.collection)
    return {str(k): str(v) for k, v in (info.get("properties") or {}).items()}


def check_properties(s: MilvusSettings, props: dict[str, str], model: str | None) -> None:
    where = f"Milvus collection {s.collection!r} at {s.uri}"
    if props.get("clawkb.schema") != SCHEMA_VERSION:
        raise IndexError_(
            f"{where} has clawkb schema {props.get('clawkb.schema')!r}, this clawkb writes"
            f" {SCHEMA_VERSION!r}: export it with the clawkb that made it, or use another collection"
        )
    if props.get("clawkb.tokenizer") != TOKENIZER_VERSION:
        raise IndexError_(
            f"{where} was built with tokenizer {props.get('clawkb.tokenizer')!r}, this clawkb uses"
            f" {TOKENIZER_VERSION!r}: drop the collection and run `clawkb sync` again"
        )
    have = props.get("clawkb.model", NO_MODEL)
    if model is not None and have != model:
        raise IndexError_(
            f"{where} holds vectors of {have!r} but this knowledge base uses {model!r}; use"
            " another collection or set embedding.model to the collection's model"
        )
