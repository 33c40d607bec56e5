"""Bring the lexical index up to date with the store's change log.

The store is the truth; the index records the last change sequence it
applied. Replaying is idempotent, so a crash at any point is repaired by the
next sync.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from clawkb.index.lexical import LexicalIndex
from clawkb.index.segment import DocFields
from clawkb.store.repo import Repository
from clawkb.text import tokenize


def doc_fields(chunk_id: int, title: str, heading_json: str, kind: str, text: str) -> DocFields:
    """Split a chunk into BM25F fields: title + heading path, body, code."""
    heading = json.loads(heading_json)
    head_text = " ".join([title, *heading]) if title not in heading else " ".join(heading)
    toks = tokenize(text)
    if kind == "code":
        return DocFields(chunk_id, tokenize(head_text), [], toks)
    return DocFields(chunk_id, tokenize(head_text), toks, [])


def sync_lexical(
    repo: Repository,
    lexical: LexicalIndex,
    batch_chunks: int = 20000,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Apply pending changes in batches; return the number of changes applied."""
    if lexical.applied_seq < repo.pruned_upto():
        # The log was pruned past what this index saw (or a rebuild was cut
        # short): replaying cannot repair it, so rebuild from the chunks.
        rebuild_lexical(repo, lexical, batch_chunks)
        return 0
    applied = 0
    while True:
        changes = repo.changes_since(lexical.applied_seq, batch_chunks)
        if not changes:
            break
        last_seq = changes[-1][0]
        added: dict[int, bool] = {}
        deletes: list[int] = []
        for _, op, cid in changes:
            if op == "add":
                added[cid] = True
            else:
                added.pop(cid, None)
                deletes.append(cid)
        adds = (doc_fields(*row) for row in repo.index_rows(sorted(added)))
        lexical.apply(adds, deletes, last_seq)
        applied += len(changes)
        if progress:
            progress(len(changes))
    if applied:
        repo.prune_changes(lexical.applied_seq)
    return applied


def rebuild_lexical(repo: Repository, lexical: LexicalIndex, batch_chunks: int = 20000) -> int:
    """Drop the index and rebuild it from every chunk in the store."""
    lexical.clear()  # marks the index incomplete (applied_seq = -1) until the end
    ids = repo.all_chunk_ids()
    seq = repo.max_seq()
    for i in range(0, len(ids), batch_chunks):
        part = ids[i : i + batch_chunks]
        adds = (doc_fields(*row) for row in repo.index_rows(part))
        lexical.apply(adds, [], -1)
    lexical.apply([], [], seq)
    repo.prune_changes(seq)
    return len(ids)
