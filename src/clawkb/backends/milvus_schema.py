"""The Milvus collection clawkb owns: fields, indexes, version and model check.

One row per chunk, keyed by its anchor. Collection properties record the
schema version, the tokenizer version and the dense model (``model_key`` and
dimension); opening a collection made with another of any of them is a clear
error, never a silent mix.

They also record, per ingesting knowledge base (the rows' ``source``), the
version of the rows' searchable text (:data:`ROW_TEXT_VERSION`: the ``terms``
field repeats a chunk's title by the title weight). Rows written by another
version keep their old text until rewritten, so a search on such a collection is
refused with one line saying it must be rebuilt, and ``clawkb sync`` rewrites the
rows of its knowledge base when its version differs
(:func:`clawkb.backends.milvus_sync.sync_milvus`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Protocol

from clawkb.backends.settings import MilvusSettings
from clawkb.errors import BackendError, ConfigError, IndexError_
from clawkb.index.lexical import BM25FParams
from clawkb.text import TOKENIZER_VERSION

#: Bump when fields change; a collection of another version is refused.
SCHEMA_VERSION = "2"  # 2: trust and domain (clawkb.knowledge)
#: Milvus BM25 has one field, so the title field's tokens are written as many
#: times as the local BM25F title weight is to the body's (2 with today's weights;
#: at 4, same-run nDCG@10 on the whole of cranfield, lexical, was 0.3724 Milvus vs
#: 0.3675 local). Milvus's one length norm (b of the body) stands in for the
#: title's own b.
TITLE_REPEAT = max(1, round(BM25FParams().weights[0] / BM25FParams().weights[1]))
#: The version of a row's searchable text (:func:`clawkb.backends.milvus_rows.lexical_terms`):
#: bump the number when that text changes; a new title weight changes it by itself.
ROW_TEXT_VERSION = f"1/title*{TITLE_REPEAT}"
#: Property ``clawkb.rowtext.<source>``: the row-text version of that source's rows.
ROW_TEXT_PREFIX = "clawkb.rowtext."
#: Property value for a source whose rows' version is not known (written before it was kept).
UNKNOWN_ROW_TEXT = "unknown"
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
#: An entity as Milvus returns it: field name -> value (a search hit also carries
#: ``_score``, added by :mod:`clawkb.backends.milvus_search`).
Entity = dict[str, Any]


class IndexParams(Protocol):
    """``MilvusClient.prepare_index_params()`` (pymilvus ships no type information)."""

    def add_index(
        self,
        field_name: str,
        index_type: str = "",
        metric_type: str = "",
        params: Mapping[str, object] | None = None,
    ) -> None: ...


class QueryIterator(Protocol):
    def next(self) -> list[Entity]: ...

    def close(self) -> None: ...


class MilvusClient(Protocol):
    """The calls clawkb makes on ``pymilvus.MilvusClient``: the one place that states
    what they take and return (pymilvus ships no type information)."""

    def has_collection(self, collection_name: str) -> bool: ...

    def create_collection(
        self,
        collection_name: str,
        *,
        schema: object,
        index_params: IndexParams,
        properties: dict[str, str],
    ) -> None: ...

    def describe_collection(self, collection_name: str) -> dict[str, Any]: ...

    def alter_collection_properties(
        self, collection_name: str, properties: dict[str, str]
    ) -> None: ...

    def load_collection(self, collection_name: str) -> None: ...

    def prepare_index_params(self) -> IndexParams: ...

    def get_collection_stats(self, collection_name: str) -> dict[str, Any]: ...

    def flush(self, collection_name: str) -> None: ...

    def delete(self, collection_name: str, *, filter: str) -> object: ...

    def upsert(self, collection_name: str, data: list[Entity]) -> object: ...

    def query(
        self, collection_name: str, *, filter: str, output_fields: list[str], limit: int
    ) -> list[Entity]: ...

    def query_iterator(
        self, collection_name: str, *, batch_size: int, filter: str, output_fields: list[str]
    ) -> QueryIterator: ...

    def search(
        self,
        collection_name: str,
        *,
        data: list[object],
        anns_field: str,
        limit: int,
        filter: str,
        output_fields: list[str],
        search_params: dict[str, object],
    ) -> Sequence[Sequence[Entity]]: ...

    def hybrid_search(
        self,
        collection_name: str,
        reqs: list[object],
        ranker: object,
        *,
        limit: int,
        output_fields: list[str],
    ) -> Sequence[Sequence[Entity]]: ...

    def close(self) -> None: ...


_clients: dict[tuple[str, str, str], MilvusClient] = {}
_lock = threading.Lock()


def require_pymilvus() -> ModuleType:
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
    module: ModuleType = pymilvus  # untyped: its names are read as Any
    return module


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


def client(s: MilvusSettings) -> MilvusClient:
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
                c = pm.MilvusClient(**kwargs)  # pymilvus: untyped, a MilvusClient
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


def properties(dim: int, model: str, signature: str = "", source: str = "") -> dict[str, str]:
    """A new collection's properties; ``source``: the knowledge base about to write rows."""
    out = {
        "clawkb.schema": SCHEMA_VERSION,
        "clawkb.tokenizer": TOKENIZER_VERSION,
        "clawkb.model": model,
        "clawkb.dim": str(dim),
        "clawkb.signature": signature,  # the embedder signature (JSON), for import
        "clawkb.rowtext": ROW_TEXT_VERSION,  # kept per source from the start: no legacy rows
    }
    if source:
        out[ROW_TEXT_PREFIX + source] = ROW_TEXT_VERSION
    return out


def row_text_versions(props: dict[str, str]) -> dict[str, str]:
    """Per source, the row-text version of its rows."""
    return {k[len(ROW_TEXT_PREFIX) :]: v for k, v in props.items() if k.startswith(ROW_TEXT_PREFIX)}


def row_text_problem(props: dict[str, str]) -> str | None:
    """Why the rows' searchable text may not be this clawkb's, or None."""
    versions = row_text_versions(props)
    if not versions:  # no writer recorded its rows: the version the collection was made with
        made = props.get("clawkb.rowtext")
        if made is None:
            return "has rows written before clawkb kept their row-text version"
        versions = {"": made}
    stale = sorted(f"{v!r}" + (f" (source {src})" if src else "")
                   for src, v in versions.items() if v != ROW_TEXT_VERSION)  # fmt: skip
    if stale:
        return "has rows of row-text version " + ", ".join(stale)
    return None


def set_row_text(s: MilvusSettings, versions: dict[str, str]) -> None:
    """Record the row-text version of these sources' rows."""
    props = {ROW_TEXT_PREFIX + src: v for src, v in versions.items()}
    try:
        client(s).alter_collection_properties(s.collection, props)
    except Exception as exc:
        raise BackendError(
            f"cannot update Milvus collection {s.collection!r}: {_short(exc)}"
        ) from exc


def build_schema(pm: ModuleType, dim: int) -> object:
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


def index_params(c: MilvusClient, s: MilvusSettings, dim: int, k1: float, b: float) -> IndexParams:
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
    k1: float = 1.2, b: float = 0.75, signature: str = "", source: str = "",
    row_text: bool = True,
) -> dict[str, str]:  # fmt: skip
    """Make sure the collection exists, is loaded and matches; return its properties.

    ``create`` (a writer, ``source`` its id) makes a missing collection with
    ``dim``/``model`` (``dim`` 0 = lexical only). An existing one must carry this
    schema and tokenizer version, and — when ``model`` is given — the same dense
    model; a reader (not ``create``, and ``row_text``) also needs every row's text
    of this version (a writer rewrites its own rows instead).
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
            properties=properties(dim, model, signature, source),
        )
    props = collection_properties(s)
    check_properties(
        s, props, model if create or model != NO_MODEL else None, row_text=row_text and not create
    )
    c.load_collection(s.collection)
    return props


def collection_properties(s: MilvusSettings) -> dict[str, str]:
    info = client(s).describe_collection(s.collection)
    return {str(k): str(v) for k, v in (info.get("properties") or {}).items()}


def check_properties(
    s: MilvusSettings, props: dict[str, str], model: str | None, *, row_text: bool = True
) -> None:
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
    problem = row_text_problem(props) if row_text else None
    if problem:
        raise IndexError_(
            f"{where} {problem}, this clawkb searches {ROW_TEXT_VERSION!r}: the collection must"
            " be rebuilt (run `clawkb sync` on each knowledge base that writes into it)"
        )
