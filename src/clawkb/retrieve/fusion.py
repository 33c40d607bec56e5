"""Fuse ranked channels (lexical, dense) into one ranking: pure functions with traces.

``rrf``: weighted reciprocal-rank fusion, sum of w_c / (k + rank_c); robust
because it ignores score scales. ``linear``: α·BM25 + β·cosine + γ·recency
with each channel's scores normalised per query (``minmax`` or ``zscore``);
a candidate missing from a channel gets that channel's floor. Every result
carries, per channel, its rank, raw and normalised score and contribution,
which is what ``--explain`` prints.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from clawkb.errors import ConfigError

NORMS = ("minmax", "zscore")


@dataclass(frozen=True)
class Channel:
    """One ranked list: chunk ids best first, with the channel's raw scores."""

    ids: np.ndarray
    scores: np.ndarray


@dataclass
class Fused:
    """A fused candidate: chunk id, fused score and its per-channel trace.

    :func:`rrf` fuses hundreds of candidates a query and only the first few traces
    are ever read (the not-found decision, ``--explain``), so its traces are built
    on first access from the channel lists (:class:`_RRFTraces`); the values are the
    ones an eager build gives. ``trace`` stays a dataclass field (plugins use
    ``dataclasses.replace``); the property below stands in for it.
    """

    chunk_id: int
    score: float
    trace: dict[str, Any] = field(default_factory=dict)


def _get_trace(self: Fused) -> dict[str, Any]:
    t: dict[str, Any] | None = self._trace  # type: ignore[attr-defined]
    if t is None:
        table, row = self._lazy  # type: ignore[attr-defined]
        t = self._trace = table.trace(row)  # type: ignore[attr-defined]
        self._lazy = None  # type: ignore[attr-defined]
    return t


def _set_trace(self: Fused, value: dict[str, Any]) -> None:
    self._trace, self._lazy = value, None  # type: ignore[attr-defined]


Fused.trace = property(_get_trace, _set_trace)  # type: ignore[assignment]


class Traces(Protocol):
    """A table that builds the trace of its ``row``-th candidate when it is read."""

    def trace(self, row: int) -> dict[str, Any]: ...


def lazy(chunk_id: int, score: float, table: Traces, row: int) -> Fused:
    """A :class:`Fused` whose trace ``table.trace(row)`` builds on first read."""
    f: Fused = object.__new__(Fused)
    f.__dict__ = {"chunk_id": chunk_id, "score": score, "_trace": None, "_lazy": (table, row)}
    return f


class OneChannel:
    """The traces of a single channel's list, taken as the fused ranking."""

    __slots__ = ("name", "raws")

    def __init__(self, name: str, raws: list[float]) -> None:
        self.name, self.raws = name, raws

    def trace(self, row: int) -> dict[str, Any]:
        return {self.name: {"rank": row + 1, "raw": round(self.raws[row], 6)}}


def single(name: str, ch: Channel) -> list[Fused]:
    """One channel as the fused ranking: its scores, traces built when read."""
    raws = ch.scores.tolist()
    table = OneChannel(name, raws)
    return [
        lazy(c, v, table, row) for row, (c, v) in enumerate(zip(ch.ids.tolist(), raws, strict=True))
    ]


class _RRFTraces:
    """The channel lists of one :func:`rrf` call: each candidate's trace, on demand."""

    __slots__ = ("k", "ranks", "raws", "weights")

    def __init__(self, k: int | float) -> None:
        self.k = k
        #: per channel name: (its weight, rank per candidate row (0: absent), raw scores)
        self.weights: dict[str, float] = {}
        self.ranks: dict[str, np.ndarray] = {}
        self.raws: dict[str, list[float]] = {}

    def trace(self, row: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        k = self.k
        for name, ranks in self.ranks.items():
            rank = int(ranks[row])
            if rank:
                contrib = self.weights[name] / (k + rank)
                out[name] = {
                    "rank": rank,
                    "raw": round(self.raws[name][rank - 1], 6),
                    "norm": round(1.0 / (k + rank), 6),
                    "contribution": round(contrib, 6),
                }
        return out


def _normalise(scores: np.ndarray, how: str) -> np.ndarray:
    if how not in NORMS:
        raise ConfigError(f"fusion norm must be one of {', '.join(NORMS)}, got {how!r}")
    s = scores.astype(np.float64)
    if len(s) == 0:
        return s
    if how == "minmax":
        lo, hi = float(s.min()), float(s.max())
        return np.ones_like(s) if hi - lo < 1e-12 else (s - lo) / (hi - lo)
    sd = float(s.std())
    return np.zeros_like(s) if sd < 1e-12 else (s - float(s.mean())) / sd


def rrf(channels: Mapping[str, Channel], weights: Mapping[str, float], k: int = 60) -> list[Fused]:
    """Weighted reciprocal-rank fusion."""
    if k < 0:
        raise ConfigError(f"rrf k must be >= 0, got {k}")
    lists = [np.asarray(ch.ids, np.int64) for ch in channels.values()]
    if not lists or any(len(np.unique(ids)) != len(ids) for ids in lists):
        return _rrf_loop(channels, weights, k)
    # vectorised: the same sums in the same order (0.0 + first channel + second ...),
    # the same order (score descending, then chunk id), traces built when read
    uniq, inverse = np.unique(np.concatenate(lists), return_inverse=True)
    scores = np.zeros(len(uniq), np.float64)
    table = _RRFTraces(k)
    start = 0
    for (name, ch), ids in zip(channels.items(), lists, strict=True):
        w = float(weights.get(name, 1.0))
        ranks = np.arange(1, len(ids) + 1, dtype=np.int64)
        rows = inverse[start : start + len(ids)]
        start += len(ids)
        scores[rows] += w / (k + ranks).astype(np.float64)  # ids unique within a channel
        rank_of = np.zeros(len(uniq), np.int64)
        rank_of[rows] = ranks
        table.weights[name], table.ranks[name] = w, rank_of
        table.raws[name] = np.asarray(ch.scores).tolist()
    order = np.lexsort((uniq, -scores))
    return [
        lazy(cid, sc, table, row)
        for cid, sc, row in zip(
            uniq[order].tolist(), scores[order].tolist(), order.tolist(), strict=True
        )
    ]


def _rrf_loop(
    channels: Mapping[str, Channel], weights: Mapping[str, float], k: int = 60
) -> list[Fused]:
    """:func:`rrf` one candidate at a time (a channel listing an id twice)."""
    out: dict[int, Fused] = {}
    for name, ch in channels.items():
        w = float(weights.get(name, 1.0))
        for rank, (cid, raw) in enumerate(zip(ch.ids.tolist(), ch.scores.tolist(), strict=True), 1):
            contrib = w / (k + rank)
            f = out.setdefault(cid, Fused(cid, 0.0))
            f.score += contrib
            f.trace[name] = {
                "rank": rank,
                "raw": round(raw, 6),
                "norm": round(1.0 / (k + rank), 6),
                "contribution": round(contrib, 6),
            }
    return _ranked(out)


def linear(
    channels: Mapping[str, Channel],
    weights: Mapping[str, float],
    norm: str = "minmax",
    recency: Mapping[int, float] | None = None,
    recency_weight: float = 0.0,
) -> list[Fused]:
    """α·norm(lexical) + β·norm(dense) + γ·recency; recency in [0, 1] per chunk id."""
    out: dict[int, Fused] = {}
    floors: dict[str, float] = {}
    for name, ch in channels.items():
        normed = _normalise(ch.scores, norm)
        floors[name] = float(normed.min()) if len(normed) else 0.0
        w = float(weights.get(name, 1.0))
        for rank, (cid, raw, nv) in enumerate(
            zip(ch.ids.tolist(), ch.scores.tolist(), normed.tolist(), strict=True), 1
        ):
            f = out.setdefault(cid, Fused(cid, 0.0))
            f.score += w * nv
            f.trace[name] = {
                "rank": rank,
                "raw": round(raw, 6),
                "norm": round(nv, 6),
                "contribution": round(w * nv, 6),
            }
    for name in channels:  # a candidate one channel missed gets that channel's floor
        w = float(weights.get(name, 1.0))
        for f in out.values():
            if name not in f.trace:
                f.score += w * floors[name]
                f.trace[name] = {
                    "rank": None,
                    "raw": None,
                    "norm": round(floors[name], 6),
                    "contribution": round(w * floors[name], 6),
                }
    if recency and recency_weight:
        for f in out.values():
            r = float(recency.get(f.chunk_id, 0.0))
            f.score += recency_weight * r
            f.trace["recency"] = {"norm": round(r, 6), "contribution": round(recency_weight * r, 6)}
    return _ranked(out)


def recency_score(mtime_s: float, now_s: float, half_life_days: float) -> float:
    """1.0 for a file changed now, 0.5 one half-life ago, and so on."""
    if half_life_days <= 0:
        raise ConfigError(f"recency half-life must be > 0 days, got {half_life_days}")
    age_days = max(0.0, now_s - mtime_s) / 86400.0
    return math.pow(0.5, age_days / half_life_days)


def _ranked(out: dict[int, Fused]) -> list[Fused]:
    return sorted(out.values(), key=lambda f: (-f.score, f.chunk_id))
