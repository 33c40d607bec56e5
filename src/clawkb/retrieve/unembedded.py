"""Chunks indexed but not embedded yet still rank by the lexical channel.

Between ``clawkb index`` (or ``memory store``, ``learn``) and the embedding of
the new chunks, the dense channel cannot return them. With both channels
fused, a chunk only one channel returns loses to every chunk both return, so
a new document matching the query word for word would sink under older,
merely similar ones. :func:`place` gives each such chunk the dense rank equal
to its lexical rank (and the dense score found at that rank): until it has a
vector, the lexical channel speaks for it in both.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from clawkb.retrieve.fusion import Channel


def place(
    lexical: Channel, dense: Channel, embedded: Callable[[np.ndarray], np.ndarray]
) -> Channel:
    """``dense`` with the lexical candidates that ``embedded`` says have no vector
    inserted at their lexical rank."""
    if not len(lexical.ids):
        return dense
    missing = ~embedded(lexical.ids)
    if not missing.any():
        return dense
    at = np.flatnonzero(missing)  # 0-based lexical ranks, increasing
    n = len(dense.ids) + len(at)
    pos = np.minimum(at, n - len(at) + np.arange(len(at)))  # rank r there -> rank r here
    mine = np.zeros(n, bool)
    mine[pos] = True
    ids = np.empty(n, np.int64)
    ids[mine], ids[~mine] = lexical.ids[at], dense.ids
    theirs = dense.scores.astype(np.float64)
    scores = np.empty(n, np.float64)
    scores[~mine] = theirs
    # an inserted chunk takes the score of the dense chunk it displaced (the last one's
    # when it comes after them all), so linear fusion sees it as that rank too
    taken = pos - np.arange(len(pos))
    scores[mine] = theirs[np.minimum(taken, len(theirs) - 1)] if len(theirs) else 0.0
    return Channel(ids, scores.astype(np.float32))
