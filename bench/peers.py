"""Engine adapters behind one small interface, so every engine sees the same texts.

``build(texts)`` indexes documents 0..n-1; ``query(q, k)`` returns document
indices, best first.  Latency is measured on ``query_raw`` (the engine's own
top-k call, including query tokenization) and ``resolve`` maps its result to
document indices afterwards, outside the timed region.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any


def dir_size(path: str | Path) -> int:
    """Total bytes of regular files under ``path``."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            fp = os.path.join(root, name)
            if not os.path.islink(fp):
                total += os.path.getsize(fp)
    return total


class Engine:
    """Base adapter: subclasses implement ``build`` and ``query_raw``."""

    name = "engine"

    def build(self, texts: list[str]) -> None:
        raise NotImplementedError

    def query_raw(self, q: str, k: int) -> Any:
        raise NotImplementedError

    def resolve(self, raw: Any) -> list[int]:
        return [int(i) for i in raw]

    def query(self, q: str, k: int) -> list[int]:
        return self.resolve(self.query_raw(q, k))

    def settings(self) -> dict[str, Any]:
        return {}

    def index_bytes(self) -> int | None:
        return None

    def save(self, folder: str) -> str:
        """Persist the index (``folder`` is a fresh empty directory); returns where it is."""
        raise NotImplementedError

    @classmethod
    def open_saved(cls, folder: str) -> Engine:
        """Open what :meth:`save` wrote, ready to query (used for the cold-start column)."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class ClawkbIndexEngine(Engine):
    """clawkb's lexical index alone, built from the texts in memory: what bm25s's build does.

    No store, no chunking, no worker processes: one process tokenizes and inverts
    the texts (one document = one body field, chunk id = its index) in batches of
    ``index_batch_chunks``, writes the segments and merges them as the index
    would. ``clawkb`` (the whole ingest path) is the figure a user waits for;
    this one is the like-for-like build against bm25s and tantivy.
    """

    name = "clawkb-index"

    def __init__(self) -> None:
        from clawkb.index.lexical import LexicalIndex

        self._dir = tempfile.mkdtemp(prefix="bench-clawkb-index-")
        self.lexical = LexicalIndex(Path(self._dir), writable=True)

    def build(self, texts: list[str]) -> None:
        from clawkb.config import Config
        from clawkb.index.segment import DocTexts

        batch = Config().index_batch_chunks
        for start in range(0, len(texts), batch):
            part = texts[start : start + batch]
            docs = (DocTexts(start + i, "", t, "") for i, t in enumerate(part))
            self.lexical.apply(docs, [], start + len(part))
        # as an indexing run of clawkb ends (ingest/pipeline.py): merged into few
        # segments (an older tree, measured as clawkb-index-old, may not have it)
        consolidate = getattr(self.lexical, "consolidate", None)
        if consolidate is not None:
            consolidate(len(texts))

    def query_raw(self, q: str, k: int) -> Any:
        from clawkb.text.tokenize import tokenize

        ids, _scores, _ = self.lexical.search(tokenize(q), k=k)
        return ids

    def resolve(self, raw: Any) -> list[int]:
        return _dedupe(int(i) for i in raw)

    def settings(self) -> dict[str, Any]:
        import importlib

        tok = importlib.import_module("clawkb.text.tokenize")
        return {
            "tokenizer_version": getattr(tok, "TOKENIZER_VERSION", "?"),
            "what": "LexicalIndex.apply on the texts in one process (no store, no chunking)",
        }

    def save(self, folder: str) -> str:
        return self._dir

    @classmethod
    def open_saved(cls, folder: str) -> Engine:
        from clawkb.index.lexical import LexicalIndex

        self = cls.__new__(cls)
        self._dir = folder
        self.lexical = LexicalIndex(Path(folder))
        return self

    def index_bytes(self) -> int | None:
        return dir_size(self._dir)

    def close(self) -> None:
        self.lexical.close()
        shutil.rmtree(self._dir, ignore_errors=True)


class Bm25sEngine(Engine):
    """bm25s with its own default tokenizer; ``backend`` is "numpy" or "numba"."""

    name = "bm25s"
    backend = "numpy"

    def __init__(self) -> None:
        import bm25s

        self._bm25s = bm25s
        self._retriever: Any = None
        self._n = 0

    def build(self, texts: list[str]) -> None:
        tokens = self._bm25s.tokenize(texts, show_progress=False)
        self._retriever = self._bm25s.BM25(backend=self.backend)
        self._retriever.index(tokens, show_progress=False)
        self._n = len(texts)

    def query_raw(self, q: str, k: int) -> Any:
        tokens = self._bm25s.tokenize([q], show_progress=False, return_ids=False)
        docs, scores = self._retriever.retrieve(
            tokens,
            k=min(k, self._n),
            show_progress=False,
            n_threads=0 if self.backend == "numpy" else 1,
            backend_selection=self.backend,
        )
        # bm25s fills k slots even when nothing matches; keep real matches only.
        return docs[0][scores[0] > 0]

    def settings(self) -> dict[str, Any]:
        return {
            "version": self._bm25s.__version__,
            "tokenizer": "bm25s.tokenize defaults (regex \\w\\w+, lowercase, English stopwords)",
            "method": "lucene k1=1.5 b=0.75 (defaults)",
            "backend": f"{self.backend} scoring and top-k, one thread",
        }

    def save(self, folder: str) -> str:
        self._retriever.save(folder)
        return folder

    @classmethod
    def open_saved(cls, folder: str) -> Engine:
        self = cls()
        self._retriever = self._bm25s.BM25.load(folder, mmap=True)
        if self.backend == "numba":
            self._retriever.backend = "numba"
        self._n = int(self._retriever.scores["num_docs"])
        return self

    def index_bytes(self) -> int | None:
        tmp = tempfile.mkdtemp(prefix="bench-bm25s-")
        try:
            self._retriever.save(tmp)
            return dir_size(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class Bm25sNumbaEngine(Bm25sEngine):
    """bm25s with its numba backend: its documented fast path."""

    name = "bm25s-numba"
    backend = "numba"


class TantivyEngine(Engine):
    """tantivy-py fed clawkb tokens through the whitespace tokenizer (same terms as clawkb)."""

    name = "tantivy"
    #: tantivy's tokenizer for the body field; "whitespace" means clawkb tokens go in.
    tokenizer = "whitespace"

    def __init__(self, threads: int = 1, heap_bytes: int = 256_000_000, folder: str = "") -> None:
        import tantivy

        from clawkb.text.tokenize import tokenize

        self._t = tantivy
        self._tokenize = tokenize
        self._threads = threads
        self._heap = heap_bytes
        self._searcher: Any = None
        if folder:  # an index saved by an earlier run
            self._dir = folder
            self._index = tantivy.Index.open(folder)
            self._schema = self._index.schema
            self._searcher = self._index.searcher()
            return
        self._dir = tempfile.mkdtemp(prefix="bench-tantivy-")
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("body", tokenizer_name=self.tokenizer, index_option="freq")
        builder.add_unsigned_field("id", fast=True)
        self._schema = builder.build()
        self._index = tantivy.Index(self._schema, path=self._dir)

    def _body(self, text: str) -> str:
        return " ".join(self._tokenize(text))

    def build(self, texts: list[str]) -> None:
        t = self._t
        writer = self._index.writer(heap_size=self._heap, num_threads=self._threads)
        for i, text in enumerate(texts):
            doc = t.Document()
            doc.add_unsigned("id", i)
            doc.add_text("body", self._body(text))
            writer.add_document(doc)
        writer.commit()
        writer.wait_merging_threads()
        self._index.reload()
        self._searcher = self._index.searcher()

    def _query(self, q: str) -> Any:
        t = self._t
        clauses = [
            (t.Occur.Should, t.Query.term_query(self._schema, "body", tok, index_option="freq"))
            for tok in self._tokenize(q)
        ]
        return t.Query.boolean_query(clauses) if clauses else None

    def query_raw(self, q: str, k: int) -> Any:
        query = self._query(q)
        if query is None:
            return []
        hits = self._searcher.search(query, k, count=False).hits
        return self._searcher.fast_field_values("id", [addr for _score, addr in hits])

    def settings(self) -> dict[str, Any]:
        import importlib.metadata

        return {
            "version": importlib.metadata.version("tantivy"),
            "tokenizer": "clawkb.text.tokenize, tokens joined by spaces, tantivy 'whitespace' tokenizer",
            "index_option": "freq (no positions)",
            "writer_threads": self._threads,
            "query": "boolean OR of term queries, BM25 k1=1.2 b=0.75 (tantivy fixed)",
        }

    def save(self, folder: str) -> str:
        return self._dir

    @classmethod
    def open_saved(cls, folder: str) -> Engine:
        return cls(folder=folder)

    def index_bytes(self) -> int | None:
        return dir_size(self._dir)

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)


class TantivyOwnEngine(TantivyEngine):
    """tantivy with its default tokenizer on the raw text: what a user gets out of the box.

    CJK runs become single tokens, so Chinese recall is poor: a speed ceiling,
    not a quality peer. Queries go through tantivy's own (lenient) query parser.
    """

    name = "tantivy-own"
    tokenizer = "default"

    def _body(self, text: str) -> str:
        return text

    def _query(self, q: str) -> Any:
        query, _errors = self._index.parse_query_lenient(q, ["body"])
        return query

    def settings(self) -> dict[str, Any]:
        out = super().settings()
        out["tokenizer"] = "tantivy 'default' (split on non-alphanumerics, lowercase, <= 40 bytes)"
        out["query"] = "index.parse_query_lenient(q, ['body']) (OR of terms), BM25 k1=1.2 b=0.75"
        return out


class ClawkbEngine(Engine):
    """clawkb through its public ingest path; latency via the raw lexical top-k."""

    name = "clawkb"

    def __init__(self) -> None:
        from clawkb.kb import KnowledgeBase

        self._dir = tempfile.mkdtemp(prefix="bench-clawkb-")
        self.kb = KnowledgeBase.open(self._dir, create=True)
        self.report: Any = None

    def build(self, texts: list[str]) -> None:
        from clawkb.kb import TextRecord

        records = (TextRecord(path=f"d{i}", text=t) for i, t in enumerate(texts))
        self.report = self.kb.index_texts(records)

    def query_raw(self, q: str, k: int) -> Any:
        ids, _scores = self.kb.search_ids(q, limit=k)
        return ids

    def resolve(self, raw: Any) -> list[int]:
        paths = self.kb.chunk_paths(raw) if len(raw) else []
        return _dedupe(int(p[1:]) for p in paths if p.startswith("d"))

    def search_full(self, q: str, k: int) -> list[int]:
        """Full pipeline search (SQLite, anchors); returns document indices."""
        res = self.kb.search(q, limit=k)
        hits = getattr(res, "hits", res)
        return _dedupe(int(h.anchor.path[1:]) for h in hits)

    def settings(self) -> dict[str, Any]:
        import importlib
        import importlib.metadata

        tok = importlib.import_module("clawkb.text.tokenize")
        out: dict[str, Any] = {
            "version": importlib.metadata.version("clawkb"),
            "tokenizer_version": getattr(tok, "TOKENIZER_VERSION", "?"),
            "index_workers": importlib.import_module("clawkb.ingest.sync")._workers(),
        }
        if self.report is not None:
            out["index_report"] = _plain(self.report)
        return out

    def save(self, folder: str) -> str:
        return self._dir

    @classmethod
    def open_saved(cls, folder: str) -> Engine:
        from clawkb.kb import KnowledgeBase

        self = cls.__new__(cls)
        self._dir = folder
        self.kb = KnowledgeBase.open(folder)
        self.report = None
        return self

    def index_bytes(self) -> int | None:
        return dir_size(self._dir)

    def lexical_index_bytes(self) -> int:
        """The lexical index alone (what the peers' figure covers), without the store."""
        return dir_size(Path(self._dir) / "index" / "lexical")

    def close(self) -> None:
        self.kb.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def _dedupe(ids: Any) -> list[int]:
    return list(dict.fromkeys(ids))


def _plain(obj: Any) -> Any:
    """Best-effort JSON-friendly view of a report object."""
    import dataclasses

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {k: _plain(v) for k, v in dataclasses.asdict(obj).items()}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, str | int | float | bool) or obj is None:
        return obj
    return str(obj)


ENGINES: dict[str, type[Engine]] = {
    "clawkb": ClawkbEngine,
    "clawkb-index": ClawkbIndexEngine,
    "bm25s": Bm25sEngine,
    "bm25s-numba": Bm25sNumbaEngine,
    "tantivy": TantivyEngine,
    "tantivy-own": TantivyOwnEngine,
}


def make(name: str) -> Engine:
    return ENGINES[name]()
