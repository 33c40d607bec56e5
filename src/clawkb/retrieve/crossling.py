"""Balance a query's glossary translations against its own words, per query.

A Chinese question's own tokens (characters and bigrams) and its English
translations score in different parts of a bilingual knowledge base, on
different scales: twenty CJK tokens add up to a high BM25 score on any
Chinese passage that shares a few common characters, while the English
passage that answers the question can only match the handful of translated
terms. A fixed expansion weight is either too weak there or too strong in a
monolingual corpus.

:func:`balance` therefore looks at the index once per query: it scores the
query's own tokens and the translation tokens separately (top-1 each, cheap)
and rescales the translations so that the best passage by translations alone
scores ``share`` × the best passage by the query's own words. BM25 is linear
in term weights, so the final single search ranks by
``own(d) + share · (best_own / best_translated) · translated(d)``. When the
query's own words match nothing (an English question against Chinese-only
notes) the translations keep their weight and carry the query alone.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from clawkb.retrieve.rewrite import Rewritten

#: Best translated passage's score relative to the best passage for the query's own words.
DEFAULT_SHARE = 0.8


def balance(
    lexical: Any, rw: Rewritten, share: float = DEFAULT_SHARE, allowed: np.ndarray | None = None
) -> Rewritten:
    """``rw`` with its glossary translation weights rescaled for this index."""
    n = rw.n_glossary
    if n == 0 or share <= 0:
        return rw
    own_t, own_w = rw.tokens[:-n], rw.weights[:-n]
    tr_t, tr_w = rw.tokens[-n:], rw.weights[-n:]
    best_tr = _best(lexical, tr_t, tr_w, allowed)
    if best_tr <= 0:
        return rw
    best_own = _best(lexical, own_t, own_w, allowed) if own_t else 0.0
    if best_own <= 0:
        return rw
    factor = share * best_own / best_tr
    weights = own_w + [round(w * factor, 6) for w in tr_w]
    expansions = [
        {**e, "weight": round(float(e["weight"]) * factor, 4)}  # type: ignore[arg-type]
        if e.get("source") == "glossary"
        else e
        for e in rw.expansions
    ]
    return replace(rw, weights=weights, expansions=expansions)


def _best(lexical: Any, tokens: list[str], weights: list[float], allowed: Any) -> float:
    _, scores, _ = lexical.search(tokens, k=1, term_weights=weights, allowed=allowed)
    return float(scores[0]) if len(scores) else 0.0
