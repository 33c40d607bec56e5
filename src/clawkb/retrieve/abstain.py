"""Retrieval confidence, and the decision to abstain instead of answering.

BM25 scores are not comparable across queries, so confidence is a coverage
ratio instead: the share of the question's information (IDF-weighted query
terms, question words like "what"/"什么" removed) that appears in the best of
the top passages. A question whose rare, specific terms occur nowhere in the
knowledge base scores low however high the raw BM25 score of its common
words is. Below :data:`DEFAULT_MIN_CONFIDENCE` the answer is "not found in
the knowledge base" with the nearest passages, never an invented answer.

The threshold was calibrated with ``tools/calibrate_abstain.py`` on the
shared BEIR-layout sets (see docs/answers.md for the method and numbers):
for each set half of the queries have their relevant documents removed from
the corpus (unanswerable), the other half keep them (answerable), and the
threshold maximising balanced accuracy over all sets pooled was taken.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from clawkb.index.segment import hash_terms
from clawkb.memo import bytes_lru, str_bytes
from clawkb.store.vectors_repo import stored_signature
from clawkb.text import normalize, tokenize
from clawkb.text.glossary import bundled_glossary
from clawkb.types import Anchor

if TYPE_CHECKING:
    from clawkb.retrieve.source import TermCounts

__all__ = [
    "DEFAULT_MIN_CONFIDENCE",
    "DENSE_MIN_CONFIDENCE",
    "NOT_FOUND",
    "Confidence",
    "Scored",
    "Term",
    "best_confidence",
    "content_tokens",
    "coverage",
    "coverages",
    "dense_confidence",
    "question_terms",
    "retrieval_confidence",
    "scored",
    "term_idf",
]

#: Calibrated abstain threshold (see the module docstring); config: ``answer.min_confidence``.
DEFAULT_MIN_CONFIDENCE = 0.57
#: Threshold when the KB has vectors and the dense cosine joins the evidence
#: (tools/calibrate_abstain.py --dense; bench/results/abstain-latest.md).
DENSE_MIN_CONFIDENCE = 0.64
#: e5-small top cosine mapped to confidence 0 and 1 (same calibration).
DENSE_COS_LOW, DENSE_COS_HIGH = 0.84, 0.90
#: The fixed phrase an abstaining answer starts with (tests and agents match it).
NOT_FOUND = "not found in the knowledge base"
#: How many top passages may supply the evidence.
TOP_K = 3


class Judged(Protocol):
    """A passage as the abstain decision reads it: a :class:`~clawkb.types.Hit`, or
    the not-found check's view of one (text fields plus the fusion's channel trace)."""

    @property
    def title(self) -> str: ...

    @property
    def anchor(self) -> Anchor: ...

    @property
    def text(self) -> str: ...

    @property
    def explanation(self) -> dict[str, Any] | None: ...


_EN_QUESTION = re.compile(
    r"\b(?:what|which|who|whom|whose|how|why|when|where|does|do|did|is|are|was|were|can|could|"
    r"should|would|will|the|a|an|of|in|on|for|to|with|and|or|it|its|this|that|there|have|has|"
    r"many|much|i|we|you|my|our|me|please|tell|about|be|by|at|from|as|each|any|some)\b",
    re.IGNORECASE,
)
_ZH_QUESTION = re.compile(
    r"什么|怎么样|怎么|怎样|如何|为什么|为何|哪个|哪些|哪里|哪儿|哪|多少|几个|是否|是不是|吗|呢|请问|请|一下|的|是"
)
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_PIECE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+|[^\s\u3400-\u9fff\uf900-\ufaff]+")
_EDGE_PUNCT = "?!,.;:'\"()[]{}<>"


@dataclass(frozen=True)
class Term:
    """One unit of meaning in the question, with the index tokens that express it.

    A Latin word or identifier is one term however many parts the tokenizer
    cuts it into (``STM32F401RE`` must not outweigh ``RCC`` sevenfold); a
    Chinese run contributes its bigrams as separate terms. A term's weight is
    the largest IDF among its tokens, and text earns that weight when it holds
    the term's rarest token it has.
    """

    text: str
    tokens: tuple[str, ...]
    idf: tuple[float, ...]

    @property
    def weight(self) -> float:
        return max(self.idf)

    def credit(self, present: set[str] | frozenset[str]) -> float:
        return max(
            (w for t, w in zip(self.tokens, self.idf, strict=True) if t in present), default=0.0
        )


def question_terms(lexical: TermCounts, question: str) -> list[Term]:
    """Content terms of ``question`` weighted by IDF; question words removed.

    Chinese bigrams that occur nowhere in the index although both their
    characters do are dropped: they are nearly always pairs spanning a word
    boundary ("压是"), not missing facts. A bigram with an unknown character
    ("乙醇" in a hardware KB) stays, and counts as missing.
    """
    text = _ZH_QUESTION.sub(" ", _EN_QUESTION.sub(" ", normalize(question)))
    units: list[tuple[str, list[str], bool]] = []
    for piece in _PIECE.findall(text):
        if _CJK_RUN.fullmatch(piece):
            grams = (
                [piece] if len(piece) == 1 else [piece[i : i + 2] for i in range(len(piece) - 1)]
            )
            units += [(g, [g], True) for g in grams]
        else:
            piece = piece.strip(_EDGE_PUNCT)
            toks = tokenize(piece) if piece else []
            if toks:
                units.append((piece, list(dict.fromkeys(toks)), False))
    chars = [c for text_, _, cjk in units if cjk for c in text_]
    idf = term_idf(lexical, [t for _, toks, _ in units for t in toks] + chars)
    absent = float(lexical.idf(np.zeros(1, np.int64))[0]) - 1e-9  # IDF of a term no chunk has
    terms: dict[str, Term] = {}
    for text_, toks, cjk in units:
        weights = tuple(idf[t] for t in toks)
        if cjk and len(text_) == 2 and weights[0] >= absent and max(idf[c] for c in text_) < absent:
            continue  # both characters are known: a pair across a word boundary
        terms.setdefault(text_, Term(text_, tuple(toks), weights))
    return list(terms.values())


def content_tokens(question: str) -> list[str]:
    """Query tokens without question words: the terms an answer must be about."""
    return tokenize(_ZH_QUESTION.sub(" ", _EN_QUESTION.sub(" ", question)))


def term_idf(lexical: TermCounts, tokens: Sequence[str]) -> dict[str, float]:
    """IDF of each distinct token in the lexical index (absent terms get the maximum)."""
    uniq = list(dict.fromkeys(tokens))
    if not uniq:
        return {}
    idf = lexical.idf(lexical.doc_freqs(hash_terms(uniq)))
    return {t: float(v) for t, v in zip(uniq, idf.tolist(), strict=True)}


def coverage(terms: Sequence[Term], present: set[str] | frozenset[str]) -> float:
    """Share of the terms' total weight that ``present`` tokens earn, in [0, 1]."""
    total = sum(t.weight for t in terms)
    return sum(t.credit(present) for t in terms) / total if total > 0 else 0.0


@dataclass
class Confidence:
    """Confidence in [0, 1] with the evidence behind it (for ``--explain``)."""

    value: float
    threshold: float
    best_passage: int | None = None  # index into the texts scored
    matched: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    #: "coverage" (the threshold rule) or "model" (clawkb.retrieve.abstain_model)
    method: str = "coverage"
    features: dict[str, float] = field(default_factory=dict)

    @property
    def abstain(self) -> bool:
        return self.value < self.threshold

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "value": round(self.value, 4),
            "threshold": self.threshold,
            "abstain": self.abstain,
            "method": "IDF-weighted share of the question's content terms found in the best of the top passages",
            "matched_terms": self.matched,
            "missing_terms": self.missing,
        }
        if self.method == "model":
            out["method"] = (
                "logistic model over retrieval signals (term coverage, lexical score,"
                " dense cosine, channel agreement, language); value = P(answerable)"
            )
            out["features"] = self.features
        elif self.method == "identifier":  # clawkb.retrieve.notfound.verbatim
            out["method"] = "the question names an identifier a top passage holds verbatim"
            out["features"] = self.features
        return out


def dense_confidence(cosine: float) -> float:
    """The dense channel's top cosine (e5-small) mapped onto [0, 1]."""
    return float(np.clip((cosine - DENSE_COS_LOW) / (DENSE_COS_HIGH - DENSE_COS_LOW), 0.0, 1.0))


def retrieval_confidence(
    terms: Sequence[Term],
    texts: Iterable[str],
    threshold: float = DEFAULT_MIN_CONFIDENCE,
    question: str | None = None,
    dense_cosine: float | None = None,
) -> Confidence:
    """Coverage of the question's terms by the best of the first :data:`TOP_K` ``texts``.

    A passage also earns a term it holds in another form: an English word
    with another ending (``backends`` / ``backend``, ``supported`` /
    ``supports``), or — given ``question`` — a glossary translation of the
    term (a Chinese question answered by an English passage, and back).
    With ``dense_cosine`` (the top passages' best cosine, when the KB has
    vectors) the confidence is the larger of the term coverage and
    :func:`dense_confidence`.
    """
    first = [t for _, t in zip(range(TOP_K), texts, strict=False)]
    return best_confidence(scored(terms, first, question), threshold, dense_cosine)


@dataclass(frozen=True)
class Scored:
    """The question's terms (without glossary seams), its glossary forms, and per
    passage the tokens it holds (word forms and translations credited): computed
    once, read by the coverage, spread and KB-coverage features alike."""

    terms: list[Term]
    forms: list[tuple[list[str], list[list[str]]]]
    present: list[frozenset[str]]

    @cached_property
    def values(self) -> list[float]:
        """Per passage, :func:`coverage` of the terms (read by the confidence and by
        the spread features: computed once)."""
        return [coverage(self.terms, present) for present in self.present]


def scored(
    terms: Sequence[Term],
    texts: Iterable[str],
    question: str | None = None,
    glossed: tuple[list[Term], list[tuple[list[str], list[list[str]]]]] | None = None,
) -> Scored:
    """Score ``texts`` against ``terms`` once (see :class:`Scored`); ``glossed``:
    :func:`_glossary_forms` of ``terms`` and ``question``, when already known."""
    terms, forms = glossed if glossed is not None else _glossary_forms(terms, question)
    return Scored(terms, forms, [_present(terms, text, forms) for text in texts])


def best_confidence(
    s: Scored,
    threshold: float = DEFAULT_MIN_CONFIDENCE,
    dense_cosine: float | None = None,
    depth: int = TOP_K,
) -> Confidence:
    """:func:`retrieval_confidence` over the first ``depth`` passages ``s`` scored."""
    by_weight = sorted(s.terms, key=lambda t: t.weight, reverse=True)
    best, best_i, best_present = -1.0, None, frozenset[str]()
    weighed = any(t.weight > 0 for t in s.terms)
    values = s.values if weighed else []
    for i, present in enumerate(s.present[:depth] if weighed else ()):
        cov = values[i]
        if cov > best:
            best, best_i, best_present = cov, i, present
    dense = dense_confidence(dense_cosine) if dense_cosine is not None else 0.0
    if best_i is None:
        return Confidence(dense, threshold, missing=[t.text for t in by_weight])
    return Confidence(
        value=max(best, dense),
        threshold=threshold,
        best_passage=best_i,
        matched=[t.text for t in by_weight if t.credit(best_present) > 0],
        missing=[t.text for t in by_weight if t.credit(best_present) == 0],
    )


_SUFFIXES = ("ing", "ed", "es", "s")


@lru_cache(maxsize=1 << 16)
def _stem(token: str) -> str:
    """A crude English stem for coverage only (never for the index): endings off."""
    if not token.isascii() or not token.isalpha() or len(token) < 5:
        return token
    for suffix in _SUFFIXES:
        if token.endswith(suffix) and len(token) - len(suffix) >= 4:
            return token[: -len(suffix)].rstrip("e")
    return token.rstrip("e")


def passage_coverages(
    terms: Sequence[Term], texts: Iterable[str], question: str | None = None
) -> list[tuple[float, list[str]]]:
    """Per passage: its coverage of the terms and the terms it holds, as
    :func:`retrieval_confidence` scores one passage (word forms, glossary)."""
    return coverages(scored(terms, texts, question))


def coverages(s: Scored) -> list[tuple[float, list[str]]]:
    """:func:`passage_coverages` of the passages ``s`` scored."""
    return [
        (cov, [t.text for t in s.terms if t.credit(present) > 0])
        for cov, present in zip(s.values, s.present, strict=True)
    ]


def kb_coverage(
    lexical: TermCounts,
    terms: Sequence[Term],
    question: str,
    glossed: tuple[list[Term], list[tuple[list[str], list[list[str]]]]] | None = None,
) -> float:
    """Share of the terms' weight the knowledge base holds anywhere: a term counts
    when some chunk has one of its tokens, or all tokens of one of its glossary
    translations (a Chinese question over English pages). Nonsense and other
    domains' words are mostly nowhere; a real question's words mostly are, in
    one language or the other, even when the top passages miss them. ``glossed``:
    :func:`_glossary_forms` of them, when already known (:class:`Scored`)."""
    terms, forms = glossed if glossed is not None else _glossary_forms(terms, question)
    toks = list(
        dict.fromkeys(
            [tok for t in terms for tok in t.tokens]
            + [tok for _, targets in forms for ts in targets for tok in ts]
        )
    )
    if not toks:
        return 0.0
    dfs = lexical.doc_freqs(hash_terms(toks)).tolist()
    have = {t for t, df in zip(toks, dfs, strict=True) if df > 0}
    for term_toks, targets in forms:
        if any(ts and all(t in have for t in ts) for ts in targets):
            have.update(term_toks)
    return coverage(terms, have)


def _glossary_forms(
    terms: Sequence[Term], question: str | None
) -> tuple[list[Term], list[tuple[list[str], list[list[str]]]]]:
    """The terms without Chinese pairs straddling two glossary terms (认证|令牌 → 证令),
    and per glossary match in the question: its tokens and its translations' tokens."""
    if not question:
        return list(terms), []
    seams, forms = _glossary_parts(question)
    if seams:
        terms = [t for t in terms if t.text not in seams]
    return list(terms), [(list(a), [list(ts) for ts in b]) for a, b in forms]


@lru_cache(maxsize=256)
def _glossary_parts(
    question: str,
) -> tuple[frozenset[str], tuple[tuple[tuple[str, ...], tuple[tuple[str, ...], ...]], ...]]:
    """:func:`_glossary_forms`' reading of ``question`` (the bundled glossary is fixed
    per process): kept for the few questions one decision reads it for three times."""
    matches = bundled_glossary().find(question)
    seams = frozenset(_seams(normalize(question), matches)) if matches else frozenset()
    forms = tuple(
        (
            tuple(tokenize(m.term)),
            tuple(
                tuple(t for t in tokenize(target) if len(t) > 1 or t.isascii())
                for target, _ in m.translations
            ),
        )
        for m in matches
    )
    return seams, forms


def _words_bytes(args: tuple[Any, ...], words: tuple[frozenset[str], frozenset[str]]) -> int:
    have, stems = words
    # each set's table (about 3 slots of 16 bytes an element) and its new strings
    joined = "".join(have)
    if joined.isascii():  # the sum below, without a call per token (most passages)
        tokens = 146 * len(have) + 2 * len(joined)
    else:  # at most 4 bytes a character (str_bytes), without a call per token
        tokens = 146 * len(have) + 8 * len(joined)
    return 400 + str_bytes(args[0]) + tokens + 48 * len(stems)


@bytes_lru(12 << 20, _words_bytes)
def _passage_words(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """A passage's tokens and their stems. The same passages come back search after
    search (every not-found decision reads the best 8), so this is kept per text,
    up to 12 MB of them (at 4,096 passages a long-running server held ~130 MB here;
    a count bound lets long passages take far more than short ones). Only the stems
    that differ from their token are kept (most tokens are their own stem: short,
    numeric or identifier-like); :func:`_has_stem` reads the pair."""
    have = frozenset(tokenize(text))
    # _stem keeps every token shorter than 5 or not ASCII: those are not asked
    return have, frozenset(s for t in have if len(t) >= 5 and t.isascii() and (s := _stem(t)) != t)


def _has_stem(words: tuple[frozenset[str], frozenset[str]], stem: str) -> bool:
    """True when one of the passage's tokens stems to ``stem``: a token that is its
    own stem, or a stem kept beside the tokens (:func:`_passage_words`)."""
    have, stems = words
    return stem in stems or (stem in have and _stem(stem) == stem)


def _present(
    terms: Sequence[Term], passage: str, forms: list[tuple[list[str], list[list[str]]]]
) -> frozenset[str]:
    """The passage's tokens plus the question tokens it holds in another form."""
    words = _passage_words(passage)
    have = words[0]
    extra = {
        tok for t in terms for tok in t.tokens if tok not in have and _has_stem(words, _stem(tok))
    }
    for term_toks, targets in forms:
        for toks in targets:
            if toks and all(t in have or _has_stem(words, _stem(t)) for t in toks):
                extra.update(term_toks)
                break
    return have | extra if extra else have  # no copy of the passage's set when nothing is added


def _seams(text: str, matches: list[Any]) -> set[str]:
    """The character pairs that cross the edge of a Chinese glossary term in ``text``."""
    out: set[str] = set()
    for m in matches:
        if m.lang != "zh":
            continue
        if m.start > 0:
            out.add(text[m.start - 1 : m.start + 1])
        if m.end < len(text):
            out.add(text[m.end - 1 : m.end + 1])
    return {p for p in out if len(p) == 2 and all(_CJK_RUN.fullmatch(c) for c in p)}


def has_vectors(conn: sqlite3.Connection) -> bool:
    """True when the store holds dense vectors (so searches run hybrid by default)."""
    return stored_signature(conn) is not None


def dense_top(hits: Sequence[Judged]) -> float | None:
    """The best dense cosine among the first :data:`TOP_K` hits' explanations, if any."""
    cos = [
        float(h.explanation["channels"]["dense"]["raw"])
        for h in hits[:TOP_K]
        if h.explanation
        and isinstance(h.explanation.get("channels"), dict)
        and h.explanation["channels"].get("dense", {}).get("raw") is not None
    ]
    return max(cos, default=None)
