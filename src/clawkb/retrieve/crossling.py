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

from clawkb.index.segment import hash_terms
from clawkb.retrieve.rewrite import Rewritten

#: Best translated passage's score relative to the best passage for the query's own words.
DEFAULT_SHARE = 0.8


def balance(
    lexical: Any, rw: Rewritten, share: float = DEFAULT_SHARE, allowed: np.ndarray | None = None
) -> Rewritten:
    """``rw`` with its glossary translation weights rescaled for this index.

    ``allowed`` is accepted for symmetry with the search call; the scale comes
    from index-wide document frequencies.
    """
    n = rw.n_glossary
    if n == 0 or share <= 0:
        return rw
    own = _ideal(lexical, rw.tokens[:-n], rw.weights[:-n])
    tr = _ideal(lexical, rw.tokens[-n:], rw.weights[-n:])
    if own <= 0 or tr <= 0:
        return rw  # one side matches nothing in this index: nothing to balance
    factor = share * own / tr
    weights = rw.weights[:-n] + [round(w * factor, 6) for w in rw.weights[-n:]]
    expansions = [
        {**e, "weight": round(float(e["weight"]) * factor, 4)}  # type: ignore[arg-type]
        if e.get("source") == "glossary"
        else e
        for e in rw.expansions
    ]
    return replace(rw, weights=weights, expansions=expansions)


def _ideal(lexical: Any, tokens: list[str], weights: list[float]) -> float:
    """Σ weight × IDF over the tokens some passage has: the score scale of a full match."""
    if not tokens:
        return 0.0
    per: dict[str, float] = {}
    for t, w in zip(tokens, weights, strict=True):
        per[t] = per.get(t, 0.0) + w
    uniq = list(per)
    df = lexical.doc_freqs(hash_terms(uniq))
    idf = lexical.idf(df)
    return float(sum(per[t] * float(v) for t, v, d in zip(uniq, idf, df, strict=True) if d > 0))
