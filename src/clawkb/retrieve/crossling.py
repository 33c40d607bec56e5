"""Balance a query's glossary translations against its own words, per query.

A Chinese question's own tokens (characters and bigrams) and its English
translations score in different parts of a bilingual knowledge base, on
different scales: twenty CJK tokens add up to a high BM25 score on any
Chinese passage that shares a few common characters, while the English
passage that answers the question can only match the handful of translated
terms. A fixed expansion weight is either too weak there or too strong in a
monolingual corpus.

:func:`balance` therefore rescales the translations per query from the
index's document frequencies: the translated tokens together get ``share`` of
the IDF mass (Σ weight × IDF over tokens some passage has) of the query's own
tokens, each at most :data:`MAX_TOKEN_WEIGHT`. A passage matching all the
translations then scores like one matching ``share`` of the query's own
words, whichever language dominates the index. When one side matches nothing
in the index (an English question over Chinese-only notes) the translations
keep their weight and carry the query alone. ``share`` 0.5 was chosen on the
cross-lingual set and the two Chinese sets (bench/results/crossling-latest.md):
larger shares cost monolingual Chinese nDCG (cmrc2018-dev −0.009 at 1.0 in
an earlier variant of this scaling); at 0.5 cmrc2018-dev and qbqtc-dev are
unchanged to four decimals.

:func:`dense_text` renders a cross-lingual query in the other language from
the glossary alone; :func:`dense_translation` decides (from the lexical index,
before any embedding) when the dense channel searches that rendering too, and
:func:`pick_dense` keeps whichever of the two channels the gate prefers.

:func:`translate_query` adds an optional LLM translation of the whole query
(off by default, time-budgeted) as more translation tokens.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from clawkb.retrieve.fusion import Channel
from clawkb.retrieve.rewrite import ACRONYM_MAX, Rewritten
from clawkb.retrieve.term_stats import doc_freqs
from clawkb.text import normalize
from clawkb.text.glossary import Glossary

if TYPE_CHECKING:
    from clawkb.config import Config
    from clawkb.llm import ChatClient
    from clawkb.retrieve.source import TermCounts, TermStats

#: IDF mass of the translations relative to the query's own words.
DEFAULT_SHARE = 0.5
#: No translated token may weigh more than this many of the query's own tokens: when
#: only a weak token of a translation is in the index (DDR's 数据), it must not carry
#: the whole translated share.
MAX_TOKEN_WEIGHT = 2.0
#: False: the query's own words the index lacks count too (the translations stand in for them).
OWN_KNOWN_ONLY = False


def balance(
    lexical: TermCounts,
    rw: Rewritten,
    share: float = DEFAULT_SHARE,
    allowed: np.ndarray | None = None,
) -> Rewritten:
    """``rw`` with its glossary translation weights rescaled for this index.

    ``allowed`` is accepted for symmetry with the search call; the scale comes
    from index-wide document frequencies.
    """
    n = rw.n_glossary
    if n == 0 or share <= 0:
        return rw
    doc_freqs(lexical, rw.tokens)  # one dictionary lookup for both sides, kept per generation
    own = _ideal(lexical, rw.tokens[:-n], rw.weights[:-n], known_only=OWN_KNOWN_ONLY)
    tr = _ideal(lexical, rw.tokens[-n:], rw.weights[-n:])
    if own <= 0 or tr <= 0:
        return rw  # one side matches nothing in this index: nothing to balance
    factor = share * own / tr
    weights = rw.weights[:-n] + [
        round(min(w * factor, MAX_TOKEN_WEIGHT), 6) for w in rw.weights[-n:]
    ]
    expansions = [
        {**e, "weight": round(min(float(e["weight"]) * factor, MAX_TOKEN_WEIGHT), 4)}  # type: ignore[arg-type]
        if e.get("source") == "glossary"
        else e
        for e in rw.expansions
    ]
    return replace(rw, weights=weights, expansions=expansions)


def _ideal(
    lexical: TermCounts, tokens: list[str], weights: list[float], known_only: bool = True
) -> float:
    """Σ weight × IDF over the tokens (only those some passage has, by default)."""
    if not tokens:
        return 0.0
    per: dict[str, float] = {}
    for t, w in zip(tokens, weights, strict=True):
        per[t] = per.get(t, 0.0) + w
    uniq = list(per)
    df = doc_freqs(lexical, uniq)
    idf = lexical.idf(df)
    return float(
        sum(
            per[t] * float(v)
            for t, v, d in zip(uniq, idf, df, strict=True)
            if d > 0 or not known_only
        )
    )


# -- the dense channel on the glossary translation ---------------------------------
#: The translated query replaces the original in the dense channel unless its best
#: cosine is more than this below the original's (a Chinese question over Chinese
#: passages: its English rendering finds nothing as close).
DENSE_GATE = 0.03
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[a-z0-9][a-z0-9._#-]*")


def dense_text(query: str, glossary: Glossary) -> str | None:
    """``query`` in the other language as far as the glossary knows it, or None.

    A query with Chinese glossary terms becomes their English translations plus
    the query's own Latin words (part numbers, identifiers): the leftover Chinese
    function words pull a multilingual embedding towards Chinese passages, so they
    are left out. A Latin-script query keeps its words with each glossary term
    replaced by its Chinese translation (short acronyms stay as written).
    """
    norm = normalize(query)
    parts, words, pos = [], [], 0
    for m in sorted(glossary.find(query), key=lambda m: m.start):
        if m.start < pos or (m.lang == "en" and len(m.term) <= ACRONYM_MAX and " " not in m.term):
            continue
        words.append(m.translations[0][0])
        parts += [norm[pos : m.start], m.translations[0][0]]
        pos = m.end
    if not words:
        return None
    if _CJK.search(query):
        return " ".join(words + _LATIN_WORD.findall(_CJK.sub(" ", norm)))
    return " ".join(" ".join([*parts, norm[pos:]]).split())


def dense_translation(lexical: TermStats, rw: Rewritten, glossary: Glossary) -> str | None:
    """The text a cross-lingual query's dense channel also searches, or None.

    Decided from the lexical index alone, before anything is embedded, so the
    query and its translation go through the model in one batch and through
    the vector index in one call: a query is cross-lingual when its best
    passage fits its glossary translations better than its own words
    (:func:`clawkb.retrieve.adaptive.cross_lingual` above 0), and the text is
    :func:`dense_text` when that differs from the query.
    """
    from clawkb.retrieve.adaptive import cross_lingual

    if rw.n_glossary == 0 or cross_lingual(lexical, rw) <= 0:
        return None
    text = dense_text(rw.query, glossary)
    if not text or text == normalize(rw.query):
        return None
    return text


def pick_dense(
    dense: Channel | None, other: Channel | None, text: str | None
) -> tuple[Channel | None, str | None]:
    """(dense channel, translation it searched with or None): the gate.

    ``dense`` searched the query as asked, ``other`` its translation ``text``
    (None: no translation, or its search timed out). Unless the translation's
    top cosine is :data:`DENSE_GATE` below the original's, the channel is both
    searches fused (:func:`merge_dense`): the e5-small channel on the
    translation scored hit@3 0.84 on the cross-lingual question set against
    0.32 on the question as asked (bench/results/crossling-latest.md), but on
    section titles (esp-idf-docs) the question as asked is the better of the
    two, and a glossary rendering is a guess: keeping both never loses the one
    that was right (bench/results/engdocs.md).
    """
    if text is None or other is None or dense is None:
        return dense, None
    if not len(dense.scores) or not len(other.scores):
        return dense, None
    if float(other.scores[0]) < float(dense.scores[0]) - DENSE_GATE:
        return dense, None
    return merge_dense(dense, other), text


def translated_dense(
    lexical: TermStats,
    rw: Rewritten,
    glossary: Glossary,
    dense: Channel | None,
    search: Callable[[str], Channel | None],
) -> tuple[Channel | None, str | None]:
    """(dense channel, the text it searched with when that is not the query).

    For callers that search one text at a time (the Milvus backend):
    :func:`dense_translation` decides, ``search`` runs the dense channel for the
    translation (None on time-out) and :func:`pick_dense` applies the gate.
    """
    if rw.n_glossary == 0 or dense is None or not len(dense.scores):
        return dense, None
    text = dense_translation(lexical, rw, glossary)
    if text is None:
        return dense, None
    return pick_dense(dense, search(text), text)


# -- optional query translation by the configured LLM ------------------------------
TRANSLATE_PROMPT = (
    "Translate this search query for an engineering knowledge base. If it is Chinese,"
    " answer in English; otherwise answer in Simplified Chinese. Keep identifiers,"
    " part numbers and code unchanged. Reply with the translation only."
)


def translate_query(client: ChatClient, query: str, budget_ms: float) -> str | None:
    """The query in the other language from ``client`` (a ChatClient), or None.

    Runs under ``budget_ms`` and returns None on time-out or any model error:
    translation only adds recall, it must never fail or stall a search.
    """
    from clawkb.retrieve.stages import budget

    messages = [
        {"role": "system", "content": TRANSLATE_PROMPT},
        {"role": "user", "content": query},
    ]

    def call() -> str | None:
        try:
            return str(client.chat(messages).text).strip() or None
        except Exception:  # a model failure must not fail the search
            return None

    text = budget(call, budget_ms)
    return text.splitlines()[0][:500] if text else None


def add_translation(rw: Rewritten, text: str, weight: float) -> Rewritten:
    """``rw`` plus the tokens of a translated query, counted as glossary translations."""
    from clawkb.text import tokenize

    seen = set(rw.tokens)
    added = [t for t in dict.fromkeys(tokenize(text)) if t not in seen]
    if not added:
        return rw
    return replace(
        rw,
        tokens=rw.tokens + added,
        weights=rw.weights + [weight] * len(added),
        expansions=[
            *rw.expansions,
            {"from": rw.query, "to": text, "weight": weight, "source": "llm"},
        ],
        n_glossary=rw.n_glossary + len(added),
    )


def llm_translation(config: Config, rw: Rewritten, budget_ms: float) -> tuple[Rewritten, str]:
    """The pipeline's translation step (``config``: the KB's): (rewrite, note for the trace)."""
    from clawkb.llm import load_llm_settings, make_client

    client = make_client(load_llm_settings(config))
    if client is None:
        return rw, "no LLM configured"
    text = translate_query(client, rw.query, budget_ms)
    if text is None:
        return rw, f"no translation within {budget_ms:.0f} ms"
    from clawkb.retrieve.rewrite import GLOSSARY_WEIGHT

    return add_translation(rw, text, GLOSSARY_WEIGHT), "translated"


def merge_dense(a: Channel, b: Channel, k: int = 20) -> Channel:
    """One dense channel from two searches of one query (as asked, and translated).

    Passages in reciprocal-rank order (``k`` as the fusion default), each with
    its better cosine, as long as the longer of the two lists.
    """
    score: dict[int, float] = {}
    cos: dict[int, float] = {}
    for ch in (a, b):
        for r, (cid, c) in enumerate(zip(ch.ids.tolist(), ch.scores.tolist(), strict=True), 1):
            score[cid] = score.get(cid, 0.0) + 1.0 / (k + r)
            cos[cid] = max(cos.get(cid, -1.0), float(c))
    order = sorted(score, key=lambda c: (-score[c], c))[: max(len(a.ids), len(b.ids))]
    return Channel(np.asarray(order, np.int64), np.asarray([cos[c] for c in order]))
