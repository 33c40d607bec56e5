"""`ask`'s abstain decision as a small logistic model over retrieval signals.

A single threshold on term coverage (or on the larger of coverage and the
dense cosine) cannot tell a long question that shares half its words with
the right passage (cranfield) from a short web query whose two words happen
to occur together in some unrelated paragraph (qbqtc). Several signals the
pipeline already has separate them better together:

* ``coverage`` — IDF-weighted share of the question's content terms found in
  the best of the top passages (word forms and glossary translations count;
  :func:`clawkb.retrieve.abstain.retrieval_confidence`);
* ``matched`` — the same share unweighted (how many of the terms);
* ``lex_norm`` — the top BM25 score of the content terms over their IDF mass;
* ``gap`` — relative lead of lexical hit 1 over hit 5;
* ``n_terms`` — how many content terms the question has (scaled, capped; traced
  only: in the fitting data it identifies the dataset a question came from);
* ``lang_diff`` — CJK share of the question minus that of the top passage
  (absolute): the question's language against the corpus's;
* ``cos`` — top dense cosine (KBs with vectors) and ``dconf``, the same mapped
  onto [0, 1]; ``agree`` — share of the top three hits both channels ranked in their first ten;
* ``cov2`` / ``cov5`` — the best passage's coverage minus that of the 2nd / 5th
  best of the top :data:`SPREAD_DEPTH` passages: an answer concentrates the
  question's terms in one passage, a question whose common words are merely
  scattered over the corpus covers many passages alike;
* ``rare_hit`` — share of the IDF mass of the question's :data:`RARE_TERMS`
  rarest terms that the best passage holds; ``rare_idf`` — IDF of the rarest
  term it holds over the IDF of a term no chunk has (how specific the match is);
* ``dgap`` / ``dz`` — the top dense cosine against the query's own background:
  the cosines the dense channel gave the passages below rank
  :data:`BACKGROUND_FROM` (its whole candidate list comes from this KB). ``dgap``
  is the top cosine minus their mean (x10, capped at 1), ``dz`` the same over their
  spread (/20, capped). A cross-language question reaches lower cosines than a
  same-language one (e5-small: 0.80-0.85 against 0.88-0.92), but its page still
  stands out of the KB's background; a question about nothing the KB holds
  meets a flat list of neighbours in any language;
* ``known`` — the share of the question's term weight the KB holds anywhere,
  itself or as a glossary translation (:func:`clawkb.retrieve.abstain.kb_coverage`);
* ``tcos`` / ``tgap`` / ``tlead`` — the title channel on the top three hits
  (:func:`title_evidence`): the cosine of a section title heading one of them
  (mapped like ``dconf``), that minus the top passage cosine, and whether one leads
  as the title in the other language a heading query names;
* ``whole`` — one of the top three passages holds the whole question verbatim,
  case, spaces and punctuation aside (:func:`whole`); ``agree1`` — both channels
  rank hit 1 in their first :data:`AGREE1_RANK`; ``qlen`` — the question's length
  (characters, capped; traced, not in the shipped model: it identifies the dataset);
* ``anchor`` — the share of the question's selective exact anchors
  (:mod:`clawkb.retrieve.exact`) the best of the top three hits holds verbatim;
* ``cjk`` — the question's CJK share: Chinese bigram coverage behaves unlike
  English word coverage, so the model also takes products ``cjk*coverage`` …
  (a feature name ``a*b`` in the model file is the product of the two).

:func:`features` computes them, :func:`probability` combines them with the
coefficients in ``abstain_model.json`` (fitted by ``tools/abstain_model.py``
on dev splits of the shared sets, the examples and generated unanswerable
questions; one model for KBs without vectors, one with), and ``ask`` abstains
below the shipped probability threshold. An explicit ``min_confidence``
(argument or ``answer.min_confidence`` in config) keeps the coverage rule.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from clawkb.errors import ConfigError
from clawkb.retrieve.abstain import (
    Confidence,
    Judged,
    Scored,
    Term,
    _glossary_forms,
    best_confidence,
    coverages,
    dense_confidence,
    dense_top,
    passage_coverages,
    question_terms,
    scored,
)

if TYPE_CHECKING:
    from clawkb.retrieve.source import TermCounts, TermStats

__all__ = [
    "MODEL_PATH",
    "Asked",
    "Model",
    "ask",
    "decide",
    "derived",
    "features",
    "load_model",
    "model_confidence",
    "probability",
    "value",
]

MODEL_PATH = Path(__file__).with_name("abstain_model.json")
#: Content terms counted by ``n_terms`` (more are scored as this many).
MAX_TERMS = 20
#: A top hit counts for ``agree`` when both channels ranked it this high or higher.
AGREE_RANK = 10
#: Characters of the question counted by ``qlen`` (longer ones score 1).
MAX_CHARS = 40
#: ``agree1``: the first hit is within this rank in both channels.
AGREE1_RANK = 3
#: Lexical hits compared by ``gap``.
GAP_DEPTH = 5
#: Passages scored for ``cov2`` / ``cov5``.
SPREAD_DEPTH = 8
#: Rarest question terms checked by ``rare_hit``.
RARE_TERMS = 2
#: Dense cosines from this rank down are the query's background (``dgap``, ``dz``).
BACKGROUND_FROM = 10
#: Fewer background cosines than this: no background features (0). A KB with fewer
#: than 2 x BACKGROUND_FROM candidates uses the lower half of its list.
MIN_BACKGROUND = 2
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_NOT_WORD = re.compile(r"[\W_]+")
#: ``whole``: the shortest question (letters and digits, spaces and punctuation
#: removed) it credits, with and without Chinese characters.
WHOLE_CJK, WHOLE_LATIN = 3, 6
_WORDISH = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[A-Za-z0-9]+")


class Model:
    """One fitted logistic model: feature names, coefficients, intercept, threshold."""

    def __init__(self, spec: Mapping[str, Any], origin: str) -> None:
        try:
            self.features = [str(f) for f in spec["features"]]
            self.coef = [float(c) for c in spec["coef"]]
            self.intercept = float(spec["intercept"])
            self.threshold = float(spec["threshold"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{origin}: bad abstain model ({exc})") from None
        if len(self.coef) != len(self.features):
            raise ConfigError(
                f"{origin}: {len(self.coef)} coefficients for {len(self.features)} features"
            )
        #: each feature's parts (``a*b``: an interaction), split once
        self._parts = [(c, f.split("*")) for f, c in zip(self.features, self.coef, strict=True)]

    def probability(self, feats: Mapping[str, float]) -> float:
        z = self.intercept + sum(c * _product(feats, parts) for c, parts in self._parts)
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))


def value(feats: Mapping[str, float], name: str) -> float:
    """A feature, or the product of features for an interaction ``a*b``."""
    return _product(feats, name.split("*"))


def _product(feats: Mapping[str, float], parts: Sequence[str]) -> float:
    out = 1.0
    for part in parts:
        out *= float(feats.get(part, 0.0))
    return out


@lru_cache(maxsize=4)
def load_model(path: str = str(MODEL_PATH)) -> dict[str, Model]:
    """The models by KB kind (``lexical``, ``hybrid``) from the JSON file."""
    try:
        doc = json.loads(Path(path).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the abstain model ({exc})") from None
    return {kind: Model(spec, f"{path} [{kind}]") for kind, spec in doc["models"].items()}


def probability(feats: Mapping[str, float], vectors: bool) -> tuple[float, float]:
    """(probability the question is answerable, the threshold to abstain below)."""
    m = load_model()["hybrid" if vectors else "lexical"]
    return m.probability(feats), m.threshold


def _cjk_share(text: str) -> float:
    # the units of _WORDISH, counted in C: one per CJK character, and one per run
    # of ASCII letters and digits (every other character, as "?", separates runs)
    cjk = len(_CJK.findall(text))
    units = cjk + len(text.encode("ascii", "replace").translate(_RUNS).split())
    return cjk / units if units else 0.0


#: bytes.translate table: ASCII letters and digits stay, every other byte is a space
_RUNS = bytes(c if chr(c).isascii() and chr(c).isalnum() else 32 for c in range(256))


def features(
    lexical: TermStats,
    question: str,
    hits: Sequence[Judged],
    terms: Sequence[Term],
    coverage: float,
    n_matched: int,
    cosine: float | None,
    texts: Sequence[str] = (),
    dense_scores: Sequence[float] | np.ndarray | None = None,
    done: Scored | None = None,
    asked: Asked | None = None,
) -> dict[str, float]:
    """The model's inputs for one question (see the module docstring); ``texts``:
    the hits as scored for coverage (title, headings, text); ``dense_scores``: the
    dense channel's cosines for its whole candidate list (when it ran); ``done``:
    ``texts`` already scored against ``terms`` (:func:`~clawkb.retrieve.abstain.scored`);
    ``asked``: the question's own features, read before the hits were known (:func:`ask`)."""
    if asked is None:
        glossed = (done.terms, done.forms) if done is not None else None
        asked = _asked(lexical, question, terms, glossed)
    lex_norm, gap = asked.lex_norm, asked.gap
    agree = 0.0
    if hits:
        both = [h for h in hits[:3] if _both_channels(h)]
        agree = len(both) / min(3, len(hits))
    top_text = hits[0].text if hits else ""
    base = {
        "coverage": round(float(coverage), 6),
        "matched": round(n_matched / len(terms), 6) if terms else 0.0,
        "lex_norm": round(lex_norm, 6),
        "gap": round(gap, 6),
        "n_terms": min(len(terms), MAX_TERMS) / MAX_TERMS,
        "lang_diff": round(abs(_cjk_share(question) - _cjk_share(top_text)), 6),
        "cos": round(float(cosine), 6) if cosine is not None else 0.0,
        "agree": round(agree, 6),
        "agree1": 1.0 if hits and _both_channels(hits[0], AGREE1_RANK) else 0.0,
        "anchor": round(anchored(hits[:3]), 6),
        "known": asked.known,
        "qlen": min(len(question), MAX_CHARS) / MAX_CHARS,
        "whole": whole(question, texts[:3]),
        **title_evidence(hits[:3], cosine),
        **spread(lexical, question, terms, texts, done),
        **background(dense_scores),
    }
    return derived(base, question)


@dataclass(frozen=True)
class Asked:
    """What the decision reads from the question and the index alone, before any hit
    is known (:func:`ask`): a search computes it while the query is being embedded."""

    question: str
    terms: list[Term]
    #: the terms without glossary seams, and the question's glossary forms
    glossed: tuple[list[Term], list[tuple[list[str], list[list[str]]]]]
    lex_norm: float
    gap: float
    known: float


def ask(lexical: TermStats, question: str) -> Asked:
    """The question's own features (terms, best lexical score and its lead over the
    fifth, the share of its terms the KB holds), for :func:`decide`'s ``asked``."""
    terms = question_terms(lexical, question)
    return _asked(lexical, question, terms, _glossary_forms(terms, question))


def _asked(
    lexical: TermStats,
    question: str,
    terms: Sequence[Term],
    glossed: tuple[list[Term], list[tuple[list[str], list[list[str]]]]] | None,
) -> Asked:
    from clawkb.retrieve.abstain import kb_coverage

    tokens = list(dict.fromkeys(tok for t in terms for tok in t.tokens))
    mass = sum(t.weight for t in terms)
    lex_norm = gap = 0.0
    if tokens and mass > 0:
        _, scores, _ = lexical.search(tokens, k=GAP_DEPTH)
        if len(scores) and float(scores[0]) > 0:
            top = float(scores[0])
            lex_norm = top / mass
            gap = (top - float(scores[-1])) / top if len(scores) >= GAP_DEPTH else 1.0
    if glossed is None:
        glossed = _glossary_forms(terms, question)
    known = round(kb_coverage(lexical, terms, question, glossed), 6) if terms else 0.0
    return Asked(question, list(terms), glossed, lex_norm, gap, known)


def background(scores: Sequence[float] | np.ndarray | None) -> dict[str, float]:
    """``dgap`` and ``dz``: the top dense cosine against the rest of the channel's list."""
    s = np.sort(np.asarray(scores if scores is not None else [], dtype=np.float64))[::-1]
    # a KB too small for that many candidates: its lower half is the background
    start = min(BACKGROUND_FROM, len(s) // 2)
    if len(s) - start < MIN_BACKGROUND:
        return {"dgap": 0.0, "dz": 0.0}
    bg = s[start:]
    gap = float(s[0] - bg.mean())
    z = gap / (float(bg.std()) + 1e-3)
    return {
        "dgap": round(min(1.0, max(0.0, 10 * gap)), 6),
        "dz": round(min(1.0, max(0.0, z / 20)), 6),
    }


def whole(question: str, texts: Sequence[str]) -> float:
    """1 when one of ``texts`` holds the whole question verbatim, case, spaces and
    punctuation aside (``intimateyogaforcouples`` in ``intimate_yoga_for_couples``,
    ``紫金山山地车`` in a title naming it): a query that is a name or a title the passage
    carries. At least :data:`WHOLE_CJK` characters when the question has Chinese,
    :data:`WHOLE_LATIN` otherwise (a short Latin string is inside many longer words)."""
    q = _squash(question)
    need = WHOLE_CJK if _CJK.search(q) else WHOLE_LATIN
    if len(q) < need:
        return 0.0
    return 1.0 if any(q in _squash(t) for t in texts) else 0.0


def _squash(text: str) -> str:
    return _NOT_WORD.sub("", text.lower())


def title_evidence(hits: Sequence[Any], cosine: float | None) -> dict[str, float]:
    """``tcos``, ``tgap``, ``tlead``: what the title channel (:mod:`clawkb.retrieve.titles`)
    says of the top hits. ``tcos``: the best cosine of a section title heading one of
    them with the query, mapped like ``dconf`` (0 when the channel listed none of them
    and none leads: no title came about as close to the query as the best passage); ``tgap``: that cosine
    minus the dense top cosine (x10, within [-1, 1]); ``tlead``: 1 when one of them leads
    as the section a title in the other language names."""
    best, lead = 0.0, 0.0
    for h in hits:
        ch = (h.explanation or {}).get("channels") or {}
        t = ch.get("titles") if isinstance(ch, dict) else None
        if isinstance(t, dict):
            best = max(best, float(t.get("raw") or 0.0), float(t.get("lead_raw") or 0.0))
            lead = 1.0 if t.get("lead") else lead
    gap = min(1.0, max(-1.0, 10 * (best - float(cosine)))) if best > 0 and cosine else 0.0
    return {
        "tcos": round(dense_confidence(best), 6) if best > 0 else 0.0,
        "tgap": round(gap, 6),
        "tlead": lead,
    }


def anchored(hits: Sequence[Any]) -> float:
    """The best anchor coverage (:func:`clawkb.retrieve.exact.keep_on_top`'s trace) among ``hits``."""
    best = 0.0
    for h in hits:
        ch = (h.explanation or {}).get("channels") or {}
        ex = ch.get("exact") if isinstance(ch, dict) else None
        if isinstance(ex, dict):
            best = max(best, float(ex.get("coverage") or 0.0))
    return best


def spread(
    lexical: TermCounts,
    question: str,
    terms: Sequence[Term],
    texts: Sequence[str],
    done: Scored | None = None,
) -> dict[str, float]:
    """``cov2``, ``cov5``, ``rare_hit``, ``rare_idf`` (see the module docstring)."""
    out = {"cov2": 0.0, "cov5": 0.0, "rare_hit": 0.0, "rare_idf": 0.0}
    if not terms or not texts:
        return out
    if done is not None:
        per = coverages(done)[:SPREAD_DEPTH]
    else:
        per = passage_coverages(terms, texts[:SPREAD_DEPTH], question)
    covs = sorted((c for c, _ in per), reverse=True) + [0.0] * SPREAD_DEPTH
    held = set(max(per, key=lambda p: p[0])[1])
    rare = sorted(terms, key=lambda t: t.weight, reverse=True)[:RARE_TERMS]
    mass = sum(t.weight for t in rare)
    absent = float(lexical.idf(np.zeros(1, np.int64))[0])
    top_idf = max((t.weight for t in terms if t.text in held), default=0.0)
    out["cov2"] = round(covs[0] - covs[1], 6)
    out["cov5"] = round(covs[0] - covs[4], 6)
    out["rare_hit"] = (
        round(sum(t.weight for t in rare if t.text in held) / mass, 6) if mass else 0.0
    )
    out["rare_idf"] = round(min(1.0, top_idf / absent), 6) if absent > 0 else 0.0
    return out


def _both_channels(hit: Judged, depth: int = AGREE_RANK) -> bool:
    """Both channels ranked this hit within their first ``depth``."""
    ch = (hit.explanation or {}).get("channels") or {}
    return all(
        isinstance(ch.get(name), dict) and int(ch[name].get("rank") or 10**9) <= depth
        for name in ("lexical", "dense")
    )


def derived(feats: Mapping[str, float], question: str) -> dict[str, float]:
    """``feats`` plus ``cjk`` (the question's CJK share), ``dconf`` (mapped cosine) and
    ``unknown`` (1 when no term of the question is anywhere in the KB: ``known`` is 0)."""
    cos = float(feats.get("cos", 0.0))
    return {
        **feats,
        "cjk": round(_cjk_share(question), 6),
        "unknown": 1.0 if float(feats.get("known", 1.0)) <= 0 else 0.0,
        "dconf": round(dense_confidence(cos), 6) if cos > 0 else 0.0,
    }


def model_confidence(
    lexical: TermStats,
    question: str,
    hits: Sequence[Judged],
    terms: Sequence[Term],
    texts: Sequence[str],
    cosine: float | None,
    vectors: bool,
    dense_scores: Sequence[float] | np.ndarray | None = None,
    asked: Asked | None = None,
) -> Confidence:
    """`ask`'s :class:`~clawkb.retrieve.abstain.Confidence` from the fitted model.

    ``vectors``: the KB has vectors (searches run hybrid). The hybrid model is
    used when the dense channel ran (``cosine`` known); when the lexical
    channel was decisive and dense was skipped (early return), the lexical
    model decides, as in the fit (tools/abstain_model.py).
    """
    from dataclasses import replace

    glossed = asked.glossed if asked is not None else None
    # once for every coverage feature
    done = scored(terms, texts[:SPREAD_DEPTH], question, glossed)
    cov = best_confidence(done)
    feats = features(lexical, question, hits, terms, cov.value, len(cov.matched), cosine, texts,
                     dense_scores, done, asked)  # fmt: skip
    p, threshold = probability(feats, vectors=vectors and cosine is not None)
    return replace(cov, value=p, threshold=threshold, method="model", features=feats)


def decide(
    lexical: TermStats,
    question: str,
    hits: Sequence[Judged],
    vectors: bool,
    dense_scores: Sequence[float] | np.ndarray | None = None,
    asked: Asked | None = None,
) -> Confidence:
    """The one "is anything here relevant?" decision, used by ``search`` and ``ask``.

    ``hits``: the top passages, best first, each with ``title``, ``anchor``,
    ``text`` and (for the dense cosine and channel agreement) ``explanation``
    holding the fusion's per-channel trace. ``vectors``: the search ran with
    the dense channel on (the hybrid model decides when its cosine is known).
    ``dense_scores``: the dense channel's cosines over its candidate list.
    ``asked``: :func:`ask` of this question on this index, when already computed.
    Returns a :class:`~clawkb.retrieve.abstain.Confidence` whose ``abstain``
    says whether to answer "no match".
    """
    top = list(hits[:SPREAD_DEPTH])
    if asked is not None and asked.question != question:
        asked = None
    terms = asked.terms if asked is not None else question_terms(lexical, question)
    texts = [" ".join((h.title, *h.anchor.heading_path, h.text)) for h in top]
    cos = dense_top(top) if vectors else None
    return model_confidence(lexical, question, top, terms, texts, cos, vectors, dense_scores,
                            asked)  # fmt: skip
