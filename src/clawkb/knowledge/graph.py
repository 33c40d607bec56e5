"""The graph channel: passages one link away from the best hits.

From each of the top ``seeds`` hits, follow the links of its note (out and
in); a link written in the hit's own passage counts fully, any other link of
the note with ``decay``. The passage reached is the linked heading when the
link names one, else the target note's passage sharing most query terms. Its
score is ``weight * decay^k * seed score``; a passage already in the list
keeps the higher of its two scores. The explanation says how it was reached:
``reached via [[DDR 布线规则]] from hit 2``.
"""

from __future__ import annotations

import dataclasses
import json
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from clawkb.knowledge.links import Resolver, note_name, slug
from clawkb.retrieve.hits import make_hit
from clawkb.store import links_repo
from clawkb.text import tokenize
from clawkb.types import Hit

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase


def _best_chunk(kb: KnowledgeBase, doc_id: int, fragment: str, terms: set[str]) -> int | None:
    rows = links_repo.doc_chunks(kb.conn, doc_id)
    if not rows:
        return None
    if fragment:
        want = slug(fragment)
        for cid, hp, _ in rows:
            if want in {slug(h) for h in json.loads(hp)}:
                return int(cid)
    best = max(rows, key=lambda r: (len(terms & set(tokenize(r[2]))), -r[0]))
    return int(best[0])


def expand(
    kb: KnowledgeBase,
    query: str,
    hits: Sequence[Hit],
    *,
    weight: float = 0.5,
    decay: float = 0.5,
    seeds: int = 3,
    limit: int | None = None,
    explain: bool = False,
) -> list[Hit]:
    """``hits`` plus the passages linked from the first ``seeds`` of them, re-ranked."""
    if not hits or weight <= 0:
        return list(hits)
    res = resolver_for(kb)
    terms = set(tokenize(query))
    by_anchor = {h.anchor.id: h for h in hits}
    found: dict[int, tuple[float, str, int, str]] = {}  # chunk id -> (score, via, seed rank, kind)
    top = hits[:seeds]
    seed_ids = links_repo.chunk_ids_of_anchors(kb.conn, [h.anchor.id for h in top])
    seed_rows = kb.repo.chunks_by_ids(list(seed_ids.values()))
    for seed in top:
        row = seed_rows.get(seed_ids.get(seed.anchor.id, -1))
        if row is None:
            continue
        edges = links_repo.outgoing(kb.conn, row.doc_id)
        steps: list[tuple[int, str, str, str, float]] = []
        for chunk_id, target, frag, text, kind in edges:
            tid = res.target(target)
            if tid is not None and tid != row.doc_id:
                steps.append(
                    (tid, frag, text or target, kind, 1.0 if chunk_id == row.id else decay)
                )
        names = {row.path, res_name(res, row.doc_id), note_name(row.title)}
        for src_id, text, kind in links_repo.incoming(kb.conn, tuple(names)):
            if src_id != row.doc_id:
                steps.append((src_id, "", text or "", f"{kind} (backlink)", decay))
        for doc_id, frag, text, kind, factor in steps:
            cid = _best_chunk(kb, doc_id, frag, terms)
            if cid is None or cid == row.id:
                continue
            score = weight * factor * seed.score
            if cid not in found or found[cid][0] < score:
                found[cid] = (score, text, seed.rank, kind)
    rows = kb.repo.chunks_by_ids(found)
    merged = {h.anchor.id: h for h in hits}
    qtokens = list(tokenize(query))
    for cid, (score, via, seed_rank, kind) in found.items():
        row = rows.get(cid)
        if row is None:
            continue
        note = f"reached via [[{via}]] from hit {seed_rank}"
        old = by_anchor.get(row.anchor)
        if old is not None and old.score >= score:
            continue
        exp = {"graph": {"path": note, "kind": kind, "score": round(score, 6)}} if explain else None
        if old is not None:
            exp = {**(old.explanation or {}), **(exp or {})} if explain else old.explanation
            merged[row.anchor] = dataclasses.replace(old, score=score, explanation=exp)
        else:
            merged[row.anchor] = make_hit(row, 0, score, qtokens, exp)
    ranked = sorted(merged.values(), key=lambda h: -h.score)[: limit or None]
    return [dataclasses.replace(h, rank=i) for i, h in enumerate(ranked, start=1)]


_RESOLVERS: weakref.WeakKeyDictionary[Any, tuple[int, Resolver]] = weakref.WeakKeyDictionary()


def resolver_for(kb: KnowledgeBase) -> Resolver:
    """The KB's note-name resolver, rebuilt only after the store changed."""
    stamp = kb.repo.max_seq()
    got = _RESOLVERS.get(kb)
    if got is None or got[0] != stamp:
        got = (stamp, Resolver(kb.conn))
        _RESOLVERS[kb] = got
    return got[1]


def res_name(res: Resolver, doc_id: int) -> str:
    """The wiki name other notes use for ``doc_id`` (its file stem, casefolded)."""
    return note_name(res.paths.get(doc_id, ""))
