"""Query-adaptive fusion weights: trust the lexical channel as much as it earns.

Fixed RRF weights lose to the dense channel alone whenever the lexical
channel is weak for a query: a Chinese question against English passages (its
words are not in the index), or a natural-language question whose words are
common and spread over many passages. Per query, from what the pipeline
already has, this module reads how much the lexical channel can be trusted
and sets both channels' RRF weights from it:

* ``translated`` — how much better the best passage fits the query's glossary
  translations than its own words (0 without translations): high for a
  Chinese question over English passages, and back; such a query's dense
  channel also searches its translation, fused with the query as asked
  (:func:`clawkb.retrieve.crossling.pick_dense`); any query with a translation
  keeps the full lexical weight;
* ``dense_other`` and ``kb_other`` — share of the dense top 10, and of the
  whole KB, in the other language than the query;
* ``cjk`` — the query's language (share of CJK tokens);
* ``agreement`` — overlap of the two channels' top 10: where both lists agree
  fusion only sharpens; where they disagree the weaker channel must not
  outvote the stronger one;
* ``coverage`` and ``margin`` — share of the query's IDF mass the index knows,
  and the lexical top-1 lead over the 10th (traced for ``--explain``; they
  did not separate the sets where dense wins, see the bench report).

:func:`features` computes them, :func:`channel_weights` maps them to the
channel weight multipliers (the constants were fitted with ``bench/adaptive_fusion.py`` on
the shared sets and the cross-lingual set, see
bench/results/adaptive-fusion.md), and :func:`tune` is the pipeline's hook.
"""

from __future__ import annotations

import contextlib
import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from clawkb.index.segment import hash_terms
from clawkb.retrieve.exact import identifier_led
from clawkb.retrieve.fusion import Channel

if TYPE_CHECKING:
    from clawkb.retrieve.rewrite import Rewritten
    from clawkb.retrieve.settings import RetrievalSettings
    from clawkb.retrieve.source import TermCounts, TermStats

__all__ = ["channel_weights", "cross_lingual", "features", "tune"]

#: Lowest lexical weight multiplier for a Latin-script query.
MIN_WEIGHT = 0.15
#: ``translated`` above which the dense channel steps back (fully at +0.2).
XL_FROM = 0.3
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
#: Top-k compared for the channels' agreement.
AGREE_K = 10
#: Share of the dense top-k written in the other language from which the dense
#: channel counts as matching across languages (and lexical keeps its weight).
OTHER_FROM = 0.5
#: The most frequent Chinese characters: a passage with some Chinese prose has one.
CHINESE_MARKERS = ("的", "是", "在", "和", "了", "不", "为", "中")


def features(
    lexical: TermStats,
    tokens: Sequence[str],
    weights: Sequence[float],
    n_glossary: int,
    channels: Mapping[str, Channel],
    pre: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """The per-query signals :func:`lexical_weight` reads (all in [0, 1]); ``pre``:
    :func:`prepare`'s signals of the same query and lexical channel."""
    lex, dense = channels.get("lexical"), channels.get("dense")
    if pre is None:
        pre = _lexical_side(lexical, tokens, weights, n_glossary, lex)
    out = {k: pre[k] for k in ("cjk", "coverage", "translated")}
    out.update(agreement=0.0, margin=pre["margin"])
    if dense is not None and len(dense.ids):
        out["dense_other"] = other_language(lexical, dense.ids[:AGREE_K], out["cjk"] >= 0.5)
    out["kb_other"] = pre["kb_other"]
    if lex is not None and dense is not None and len(lex.ids) and len(dense.ids):
        a = set(lex.ids[:AGREE_K].tolist())
        b = set(dense.ids[:AGREE_K].tolist())
        out["agreement"] = len(a & b) / min(AGREE_K, len(a), len(b))
    return {k: round(v, 4) for k, v in out.items()}


def _lexical_side(
    lexical: TermStats,
    tokens: Sequence[str],
    weights: Sequence[float],
    n_glossary: int,
    lex: Channel | None,
) -> dict[str, float]:
    """The signals of :func:`features` that need only the query and the lexical channel."""
    out = {**_query_signals(lexical, tokens, weights, n_glossary), "margin": 0.0}
    if lex is not None and len(lex.scores):
        top = float(lex.scores[0])
        tenth = float(lex.scores[min(len(lex.scores), AGREE_K) - 1])
        out["margin"] = (top - tenth) / top if top > 0 else 0.0
    out["kb_other"] = kb_other_language(lexical, out["cjk"] >= 0.5)
    return out


def prepare(
    lexical: TermStats, rw: Rewritten, lex: Channel | None, settings: RetrievalSettings
) -> dict[str, float]:
    """What :func:`tune` reads from the query and the lexical channel alone: a search
    computes it while its query is being embedded (the dense channel is not needed)."""
    pre = _lexical_side(lexical, rw.tokens, rw.weights, rw.n_glossary, lex)
    pre["exact"] = exact_lead(lexical, rw.query, lex) if settings.exact else 0.0
    pre["bare"] = 1.0 if identifier_led(lexical, rw.query) else 0.0
    return pre


#: The last query's channel-independent signals: (weak reference to the index, key,
#: signals). :func:`cross_lingual` (before the dense search) and :func:`tune` (at
#: fusion) read the same ones; the key holds the index generation and the query.
_LAST: tuple[weakref.ref[TermStats], tuple[object, ...], dict[str, float]] | None = None


def _query_signals(
    lexical: TermStats, tokens: Sequence[str], weights: Sequence[float], n_glossary: int
) -> dict[str, float]:
    """``cjk``, ``coverage`` and ``translated``: two index look-ups and two top-1 searches."""
    global _LAST
    key = (
        getattr(lexical, "generation", None),
        getattr(lexical, "applied_seq", None),
        tuple(tokens),
        tuple(weights),
        n_glossary,
    )
    last = _LAST
    if last is not None and last[0]() is lexical and last[1] == key:
        return last[2]
    cut = len(tokens) - n_glossary
    own, own_w = list(tokens[:cut]), list(weights[:cut])
    coverage, own_known = _coverage(lexical, own, own_w)
    tr, tr_w = list(tokens[cut:]), list(weights[cut:])
    _, tr_known = _coverage(lexical, tr, tr_w)
    fit_own = _best(lexical, own, own_w) / own_known if own_known > 0 else 0.0
    fit_tr = _best(lexical, tr, tr_w) / tr_known if tr_known > 0 else 0.0
    out = {
        "cjk": sum(1 for t in own if _CJK.search(t)) / len(own) if own else 0.0,
        "coverage": coverage,
        # how much better the best passage fits the translations than the own words
        "translated": fit_tr / (fit_own + fit_tr) if fit_tr > 0 else 0.0,
    }
    with contextlib.suppress(TypeError):  # an index object without weak references
        _LAST = (weakref.ref(lexical), key, out)
    return out


def channel_weights(f: Mapping[str, float]) -> tuple[float, float]:
    """(lexical, dense) RRF weight multipliers in [0, 1] for these features.

    * The dense channel keeps its full weight. (It used to step back for a
      cross-lingual query; since that query's dense channel also searches the
      glossary translation, stepping back only cost: on esp-idf-docs the plain
      RRF column beat the default on both cross-lingual kinds.)
    * A Chinese query, one whose translations found anything, one whose
      lexical top-1 holds a rare identifier (``exact``), or a Latin-script
      query over passages mostly in the other language (``dense_other`` or
      ``kb_other`` at least :data:`OTHER_FROM`) keeps the full lexical weight.
    * Otherwise (a Latin-script query in the corpus's language) lexical gets
      half the channels' top-10 agreement, at least :data:`MIN_WEIGHT`: on
      natural-language English questions e5 is the stronger channel, and the
      lexical list should only outvote it where the two agree.
    * A query that spells identifiers and nothing else (``bare``:
      :func:`clawkb.retrieve.exact.bare`, e.g. ``ESP_BT_VS_DTM_RX_TEST_START_OCF``)
      has no meaning beyond its spelling. The dense model sees it as sub-word
      pieces it never saw together, and its neighbours are passages full of
      other identifiers of the same shape, so lexical keeps its full weight and
      dense steps down to :data:`MIN_WEIGHT`: a vote that breaks ties, never one
      that buries the passages holding the spelling (or, when the index lacks
      the whole run, most of its pieces).
    """
    if f.get("bare", 0.0) > 0:
        return 1.0, MIN_WEIGHT
    other = max(f.get("dense_other", 0.0), f.get("kb_other", 0.0))
    trusted = f.get("exact", 0.0) > 0 or other >= OTHER_FROM
    if trusted or f["cjk"] >= 0.5 or f["translated"] > 0:
        w_lex = 1.0
    else:
        w_lex = float(np.clip(0.5 * f["agreement"], MIN_WEIGHT, 1.0))
    return w_lex, 1.0


def cross_lingual(lexical: TermStats, rw: Rewritten) -> float:
    """How cross-lingual the query is, in [0, 1]: ``translated`` past :data:`XL_FROM`."""
    f = features(lexical, rw.tokens, rw.weights, rw.n_glossary, {})
    return float(np.clip((f["translated"] - XL_FROM) / 0.2, 0.0, 1.0))


def tune(
    lexical: TermStats,
    rw: Rewritten,
    channels: Mapping[str, Channel],
    settings: RetrievalSettings,
    dense_translated: bool = False,
    pre: Mapping[str, float] | None = None,
) -> tuple[RetrievalSettings, dict[str, float]]:
    """Settings with the adaptive channel weights, and the trace for ``--explain``.

    ``dense_translated``: the dense channel searched with the query's glossary
    translation (:func:`clawkb.retrieve.crossling.translated_dense`), so it is
    not the weak channel of a cross-lingual query and keeps its full weight.
    ``pre``: :func:`prepare` of this query, its lexical channel and ``settings``.
    """
    if pre is None:
        pre = prepare(lexical, rw, channels.get("lexical"), settings)
    f = features(lexical, rw.tokens, rw.weights, rw.n_glossary, channels, pre)
    f["exact"], f["bare"] = pre["exact"], pre["bare"]
    wl, wd = channel_weights(f)
    if dense_translated and not f["bare"]:
        wd = 1.0
    w_lex, w_dense = round(settings.w_lexical * wl, 4), round(settings.w_dense * wd, 4)
    tuned = replace(settings, w_lexical=w_lex, w_dense=w_dense)
    return tuned, {**f, "w_lexical": w_lex, "w_dense": w_dense}


def exact_lead(lexical: TermStats, query: str, lex: Channel | None) -> float:
    """Share of the query's selective anchors' IDF mass the lexical top-1 contains.

    Above 0 the lexical channel holds a verbatim match of an identifier few
    passages have (:mod:`clawkb.retrieve.exact`): a decisive match the dense
    channel cannot see, so lexical keeps its full weight.
    """
    from clawkb.retrieve.exact import anchors, coverage_of, restricted, selective

    if lex is None or not len(lex.ids) or not restricted(lexical):
        return 0.0

    weighted = selective(lexical, anchors(query))
    if not weighted:
        return 0.0
    return round(coverage_of(lexical, weighted, lex.ids[:1]).get(int(lex.ids[0]), 0.0), 4)


def other_language(lexical: TermStats, ids: np.ndarray, query_chinese: bool) -> float:
    """Share of ``ids`` whose passage is in the other language than the query.

    A passage with Chinese prose contains one of the commonest Chinese
    characters (:data:`CHINESE_MARKERS`); one restricted lexical search over
    the dense top-k says which do. The small multilingual model is strong
    within a language and weak across languages, so a Latin-script query whose
    dense neighbours are Chinese passages (an English heading over Chinese docs)
    must not hand the ranking to the dense channel.
    """
    from clawkb.retrieve.exact import restricted
    from clawkb.retrieve.term_stats import among, holders

    if not len(ids) or not restricted(lexical):
        return 0.0
    uniq = np.unique(ids)
    have = holders(lexical, CHINESE_MARKERS)  # kept per index state
    if have is not None:
        chinese = int(among(uniq, have).sum())
    else:
        got, scores, _ = lexical.search(list(CHINESE_MARKERS), k=len(ids), allowed=uniq)
        chinese = int((np.asarray(scores) > 0).sum()) if len(got) else 0
    share = chinese / len(ids)
    return round(1.0 - share if query_chinese else share, 4)


def kb_other_language(lexical: TermCounts, query_chinese: bool) -> float:
    """Share of the KB's passages in the other language than the query.

    A passage with Chinese prose contains one of :data:`CHINESE_MARKERS`; the
    largest document frequency among them, over the passage count, is the
    Chinese share of the index (two dictionary look-ups, no search).
    """
    from clawkb.retrieve.term_stats import doc_freqs

    n = int(lexical.n_docs or 0)
    if n <= 0:
        return 0.0
    share = min(1.0, float(doc_freqs(lexical, list(CHINESE_MARKERS)).max()) / n)
    return round(1.0 - share if query_chinese else share, 4)


def _best(lexical: TermStats, tokens: list[str], weights: list[float]) -> float:
    if not tokens:
        return 0.0
    _, scores, _ = lexical.search(tokens, k=1, term_weights=weights)
    return float(scores[0]) if len(scores) else 0.0


def _coverage(lexical: TermCounts, tokens: list[str], weights: list[float]) -> tuple[float, float]:
    """Share of the weighted IDF mass carried by terms the index has, and that mass."""
    if not tokens:
        return 0.0, 0.0
    per: dict[str, float] = {}
    for t, w in zip(tokens, weights, strict=True):
        per[t] = per.get(t, 0.0) + w
    uniq = list(per)
    df = lexical.doc_freqs(hash_terms(uniq))
    idf = lexical.idf(df)
    total = sum(per[t] * float(v) for t, v in zip(uniq, idf, strict=True))
    known = sum(per[t] * float(v) for t, v, d in zip(uniq, idf, df, strict=True) if d > 0)
    return (known / total if total > 0 else 0.0), known
