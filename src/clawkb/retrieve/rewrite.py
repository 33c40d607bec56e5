"""Query normalisation and rewrite from a user synonym / alias file.

The file (``synonyms.txt`` in the KB folder, or ``retrieval.synonyms`` in
config) has one group per line; every term of a group expands to the others::

    # comment
    阻抗 = impedance
    DDR = 内存颗粒, memory chip | 0.6     # optional weight of the added terms

Expansions are appended to the lexical query with their weight (the original
terms keep weight 1), so an alias can help recall without outranking the
words the user typed. The dense channel sees the original query.

Cross-lingual expansion: the bundled zh↔en glossary
(:mod:`clawkb.text.glossary`) adds the translations of the engineering terms a
query contains, both directions, at :data:`GLOSSARY_WEIGHT` (below a user
synonym's default, so the user's file wins where both apply). Chinese
translations contribute their bigrams, not single characters, which would
match nearly every Chinese passage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from clawkb.errors import ConfigError
from clawkb.text import normalize, tokenize
from clawkb.text.glossary import Glossary, bundled_glossary
from clawkb.text.tokenize import stem_of

DEFAULT_WEIGHT = 0.5
#: Weight of a glossary translation (times the pair's own weight).
GLOSSARY_WEIGHT = 0.4
#: English glossary terms this short (acronyms) are not expanded into Chinese.
ACRONYM_MAX = 4
#: Upper bound of one expansion token's weight.
MAX_WEIGHT = 1.0
#: English function words inside glossary phrases ("angle of attack") add nothing.
_FUNCTION_WORDS = frozenset({"a", "an", "and", "of", "the", "to", "in", "on", "for", "s"})


@dataclass(frozen=True)
class SynonymGroup:
    terms: tuple[str, ...]
    weight: float = DEFAULT_WEIGHT


@dataclass(frozen=True)
class Rewritten:
    query: str
    tokens: list[str]
    weights: list[float]
    expansions: list[dict[str, object]] = field(default_factory=list)
    #: how many of the last tokens are glossary translations (see clawkb.retrieve.crossling)
    n_glossary: int = 0


def load_synonyms(path: Path) -> list[SynonymGroup]:
    """Parse a synonym file; a bad line is an error naming the file and line."""
    groups: list[SynonymGroup] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the synonym file ({exc})") from exc
    for no, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        weight = DEFAULT_WEIGHT
        if "|" in line:
            line, w = line.rsplit("|", 1)
            try:
                weight = float(w)
            except ValueError:
                raise ConfigError(f"{path}:{no}: weight {w.strip()!r} is not a number") from None
            if not 0 < weight <= 1:
                raise ConfigError(f"{path}:{no}: weight must be in (0, 1], got {weight}")
        if "=" not in line:
            raise ConfigError(f"{path}:{no}: expected 'term = alias[, alias...]', got {raw!r}")
        left, right = line.split("=", 1)
        terms = [normalize(t.strip()) for t in [left, *right.split(",")] if t.strip()]
        if len(terms) < 2:
            raise ConfigError(f"{path}:{no}: a group needs at least two terms")
        groups.append(SynonymGroup(tuple(dict.fromkeys(terms)), weight))
    return groups


def word_weights(tokens: list[str]) -> list[float]:
    """One unit of weight per query word: a word followed by its Snowball stem (tokenizer
    v2) shares its unit with the stem, half each, so a word whose stem differs does not
    count twice against one whose stem is itself (``memory``+``memori`` vs ``flash``),
    while a passage with the exact form still scores above one with another form."""
    weights = [1.0] * len(tokens)
    for i in range(len(tokens) - 1):
        if weights[i] == 1.0 and tokens[i + 1] == stem_of(tokens[i]) and tokens[i + 1]:
            weights[i] = weights[i + 1] = 0.5
    return weights


def rewrite(
    query: str,
    groups: list[SynonymGroup],
    glossary: Glossary | None = None,
    glossary_weight: float = GLOSSARY_WEIGHT,
) -> Rewritten:
    """Tokens of ``query`` plus weighted tokens of the aliases of terms it contains.

    With ``glossary``, the translations of its terms found in the query follow
    at ``glossary_weight`` × the pair's weight.
    """
    tokens = tokenize(query)
    weights = word_weights(tokens)
    if not groups and glossary is None:
        return Rewritten(query, tokens, weights)
    text = normalize(query)
    expansions: list[dict[str, object]] = []
    seen = set(tokens)
    for g in groups:
        present = [t for t in g.terms if _contains(text, t)]
        if not present:
            continue
        for alias in g.terms:
            if alias in present:
                continue
            added = [t for t in tokenize(alias) if t not in seen]
            seen.update(added)
            tokens += added
            weights += [g.weight] * len(added)
            expansions.append({"from": present[0], "to": alias, "weight": g.weight})
    before = len(tokens)
    if glossary is not None and glossary_weight > 0:
        for m in glossary.find(query):
            if m.lang == "en" and len(m.term) <= ACRONYM_MAX and " " not in m.term:
                continue  # I2C, DDR, API: Chinese text writes these in Latin letters too
            span = _token_count(m.term)
            for target, pair_weight in m.translations:
                toks = _expansion_tokens(target)
                added = [t for t in toks if t not in seen]
                if not added:
                    continue
                # the translation carries ``glossary_weight`` of the mass of the words it
                # translates: 边界层 is five query tokens, "boundary layer" two
                w = round(min(glossary_weight * pair_weight * span / len(toks), MAX_WEIGHT), 4)
                seen.update(added)
                tokens += added
                weights += [w] * len(added)
                expansions.append({"from": m.term, "to": target, "weight": w, "source": "glossary"})
    return Rewritten(query, tokens, weights, expansions, len(tokens) - before)


def expand_query(query: str, glossary: bool = True) -> Rewritten:
    """The plain lexical path's rewrite: the bundled glossary only (no synonym file)."""
    return rewrite(query, [], bundled_glossary() if glossary else None)


@lru_cache(maxsize=8192)
def _token_count(term: str) -> int:
    """How many tokens a glossary term is (kept: the glossary is a fixed set of terms)."""
    return len(tokenize(term))


@lru_cache(maxsize=8192)
def _expansion_tokens(term: str) -> tuple[str, ...]:
    """Tokens of a translation: no function words, no lone CJK characters of a longer term."""
    toks = tokenize(term)
    cjk_words = [t for t in toks if len(t) > 1 and not t.isascii()]
    return tuple(
        t for t in toks if t not in _FUNCTION_WORDS and (t.isascii() or len(t) > 1 or not cjk_words)
    )


def _contains(text: str, term: str) -> bool:
    """Substring match; ASCII terms must sit on word boundaries (DDR is not in ADDRESS)."""
    start = text.find(term)
    while start >= 0:
        end = start + len(term)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not term.isascii() or (not before.isalnum() and not after.isalnum()):
            return True
        start = text.find(term, start + 1)
    return False
