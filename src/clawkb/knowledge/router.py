"""Domain routing: which domain(s) a query belongs to, from the words of each domain.

Each domain is a bag of the tokens of its chunks. A query scores a domain by
how much more likely its terms are there than in the whole KB (a smoothed
log-likelihood ratio, Jelinek-Mercer smoothing, so small and large domains
compare on one scale), so a term every domain uses says
nothing and a term only one domain uses says a lot. The router picks the best
domain, adds the second when it is close, and routes to all when no domain
stands out (or the query shares no term with any).

With vectors, each domain also has a centroid (the normalised mean of its
chunks' vectors); the query's cosine to each centroid, centred on the mean
over domains and scaled by :data:`DENSE_SCALE`, is added to its lexical score,
so a query that shares no word with a domain can still reach it.
"""

from __future__ import annotations

import math
import sqlite3
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from clawkb.store import knowledge_repo
from clawkb.text import tokenize

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase
    from clawkb.types import JSON

DENSE_SCALE = 20.0  # nats per unit of centred cosine
LAMBDA = 0.5  # weight of the domain's own term distribution against the whole KB


@dataclass
class Route:
    domains: tuple[str, ...]  # empty: all domains (unsure)
    scores: dict[str, float] = field(default_factory=dict)
    reason: str = ""

    def to_dict(self) -> dict[str, JSON]:
        return {
            "domains": list(self.domains) or "all",
            "scores": {k: round(v, 3) for k, v in self.scores.items()},
            "reason": self.reason,
        }


class DomainRouter:
    def __init__(self, counts: dict[str, Counter[str]]) -> None:
        self.counts = counts
        self.totals = {d: sum(c.values()) for d, c in counts.items()}
        self.background: Counter[str] = Counter()
        for c in counts.values():
            self.background.update(c)
        self.total = sum(self.background.values()) or 1

    @classmethod
    def from_store(cls, conn: sqlite3.Connection) -> DomainRouter:
        counts: dict[str, Counter[str]] = {}
        for domain, title, heading, text in knowledge_repo.domain_texts(conn):
            counts.setdefault(domain, Counter()).update(tokenize(f"{title} {heading} {text}"))
        return cls(counts)

    def scores(self, query: str) -> dict[str, float]:
        terms = [(t, w) for t, w in query_terms(query) if t in self.background]
        out = {}
        for d, c in self.counts.items():
            n = self.totals[d]
            s = 0.0
            for t, w in terms:
                p_bg = self.background[t] / self.total
                p_d = c[t] / n if n else 0.0
                s += w * math.log((LAMBDA * p_d + (1 - LAMBDA) * p_bg) / p_bg)
            out[d] = s
        return out

    def route(
        self,
        query: str,
        margin: float = 1.0,
        second: float = 0.5,
        qvec: np.ndarray | None = None,
        centroids: dict[str, np.ndarray] | None = None,
    ) -> Route:
        """Best domain; the runner-up too when within ``second`` nats of it; all when the
        best is not ``margin`` nats above the mean of the other domains."""
        scores = self.scores(query)
        how = "lexical"
        if qvec is not None and centroids:
            cos = {d: float(np.dot(qvec, c)) for d, c in centroids.items() if d in scores}
            if cos:
                mean = sum(cos.values()) / len(cos)
                for d, v in cos.items():
                    scores[d] += DENSE_SCALE * (v - mean)
                how = "lexical + centroids"
        if not scores or all(v == 0 for v in scores.values()):
            return Route((), scores, "no domain term in the query")
        ranked = sorted(scores, key=lambda d: -scores[d])
        best = scores[ranked[0]]
        rest = [scores[d] for d in ranked[1:]]
        others = sum(rest) / len(rest) if rest else 0.0
        if best - others < margin:
            return Route((), scores, f"unsure: best {best:.2f} vs the others' mean {others:.2f}")
        chosen = [ranked[0]]
        if len(ranked) > 1 and best - scores[ranked[1]] < second:
            chosen.append(ranked[1])
        return Route(tuple(chosen), scores, how)


def confirm(route: Route, best_domain: str | None) -> Route:
    """``route`` checked against the first pass over all domains: when the best hit lies
    in a domain the router left out, that domain joins a one-domain route (the best one
    or two are searched) and a two-domain route falls back to all. So routing never drops
    the passage plain search ranks first; it only clears other domains' hits below it."""
    if not route.domains or best_domain is None or best_domain in route.domains:
        return route
    if len(route.domains) == 1:
        why = f"{route.reason}; best hit in {best_domain}: added"
        return Route((*route.domains, best_domain), route.scores, why)
    return Route((), route.scores, f"{route.reason}; best hit in {best_domain}: all")


def _cjk(token: str) -> bool:
    return any("\u3400" <= ch <= "\u9fff" for ch in token)


def query_terms(query: str) -> list[tuple[str, float]]:
    """The query's tokens with a weight each, so that one written word counts about once:
    the parts an identifier splits into share its weight (``ddr4`` → ddr4, ddr, 4), and a
    Chinese run counts by its bigrams (its single characters, which the index also keeps,
    are left out), else one stray Chinese word outvotes several English ones."""
    out: list[tuple[str, float]] = []
    for piece in query.split():
        toks = tokenize(piece)
        cjk = [t for t in toks if _cjk(t)]
        pairs = [t for t in cjk if len(t) > 1] or cjk
        latin = [t for t in toks if not _cjk(t)]
        out += [(t, 1.0) for t in pairs] + [(t, 1.0 / len(latin)) for t in latin]
    return out


def domain_centroids(conn: sqlite3.Connection, mkey: str) -> dict[str, np.ndarray]:
    """Domain -> normalised mean of its chunks' vectors under embedder key ``mkey``."""
    sums: dict[str, np.ndarray] = {}
    for domain, blob in knowledge_repo.domain_vectors(conn, mkey):
        vec = np.frombuffer(blob, dtype="<f4").astype(np.float64)
        sums[domain] = sums[domain] + vec if domain in sums else vec.copy()
    out = {}
    for domain, total in sums.items():
        norm = float(np.linalg.norm(total))
        if norm > 0:
            out[domain] = total / norm
    return out


_ROUTERS: weakref.WeakKeyDictionary[Any, tuple[Any, DomainRouter]] = weakref.WeakKeyDictionary()


def router_for(kb: KnowledgeBase) -> DomainRouter:
    """The KB's router, rebuilt only after the store or the domain rules changed (it reads
    every domain's text)."""
    from clawkb.knowledge.hook import RULES_KEY
    from clawkb.store import db

    stamp = (kb.repo.max_seq(), db.get_meta(kb.conn, RULES_KEY))
    got = _ROUTERS.get(kb)
    if got is None or got[0] != stamp:
        got = (stamp, DomainRouter.from_store(kb.conn))
        _ROUTERS[kb] = got
    return got[1]


def route_kb(kb: KnowledgeBase, query: str) -> Route:
    """Route ``query`` in ``kb``: lexical statistics, plus centroids when vectors exist."""
    from clawkb.embed import vectors

    router = router_for(kb)
    if vectors.stored_signature(kb.conn) is None:
        return router.route(query)
    from clawkb.embed.run import kb_embedder

    embedder = kb_embedder(kb)
    centroids = domain_centroids(kb.conn, vectors.model_key(embedder.signature()))
    if not centroids:
        return router.route(query)
    qvec = np.asarray(embedder.embed_query(query), dtype=np.float64)
    return router.route(query, qvec=qvec, centroids=centroids)
