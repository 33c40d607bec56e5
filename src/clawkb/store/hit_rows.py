"""The store rows of a search's hits: chunk columns by id, document columns kept.

:meth:`Repository.chunks_by_ids` joins every chunk with its document; the
document half of that join is a second B-tree seek per row and costs as much
as the chunk itself. A search reads the document columns (path, title,
metadata, trust tier, domain) of the same documents over and over — the
chunks of one file, the files a topic lives in — and they change only when the
store does. :func:`hit_rows` therefore reads the chunk columns alone and takes
the document columns from a table kept in the KB's
:class:`~clawkb.store.memo.StoreMemo` (forgotten at the next store change),
reading only the documents it has not seen. The rows are the same
:class:`~clawkb.store.repo.ChunkRow` values ``chunks_by_ids`` returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clawkb.store.memo import StoreMemo
from clawkb.store.repo import ChunkRow, Repository, _chunk_row

_CHUNK = (
    "id, doc_id, anchor, ordinal, text, heading_path, line_start, line_end, page, kind, language"
)
#: the document columns of ``repo._CHUNK_COLS``, by document id
_DOC = (
    "id, path, title, metadata,"
    " COALESCE(trust, CASE WHEN path LIKE 'memory://%' THEN 'memory' END), domain"
)
#: Documents kept per store state; past this the table starts again.
MAX_DOCS = 100_000
_CHUNK_BATCH = 500


def hit_rows(repo: Repository, memo: StoreMemo, ids: Sequence[int]) -> dict[int, ChunkRow]:
    """Rows of the chunks ``ids``, as :meth:`Repository.chunks_by_ids` gives them.

    The caller has called ``memo.check()`` for this read (the search's freshness check).
    """
    docs: dict[int, tuple[Any, ...]] = memo.get("hit_documents", dict)
    if len(docs) > MAX_DOCS:
        docs.clear()
    conn = repo.conn
    chunks = []
    for i in range(0, len(ids), _CHUNK_BATCH):
        part = list(ids[i : i + _CHUNK_BATCH])
        q = f"SELECT {_CHUNK} FROM chunks WHERE id IN ({','.join('?' * len(part))})"
        chunks += conn.execute(q, part).fetchall()
    need = list({r[1] for r in chunks if r[1] not in docs})
    for i in range(0, len(need), _CHUNK_BATCH):
        part = need[i : i + _CHUNK_BATCH]
        q = f"SELECT {_DOC} FROM documents WHERE id IN ({','.join('?' * len(part))})"
        for d in conn.execute(q, part):
            docs[d[0]] = d[1:]
    out: dict[int, ChunkRow] = {}
    for r in chunks:
        d = docs.get(r[1])
        if d is None:  # the document went between the two reads: as if the chunk had
            continue  # (the retired copy below serves a reader of the older generation)
        path, title, metadata, trust, domain = d
        # the column order of repo._CHUNK_COLS
        out[r[0]] = _chunk_row(
            (r[0], r[1], path, title, r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10],
             metadata, trust, domain)
        )  # fmt: skip
    if len(out) < len(ids):  # deleted since the reader's index generation was built
        out.update(repo.retired_by_ids([i for i in ids if i not in out]))
    return out
