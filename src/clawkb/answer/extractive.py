"""Extractive answers: the best sentences of the top passages, each cited.

Used when no LLM is configured: never calls a model, never fails on a
non-empty context. Sentence units:

* soft-wrapped prose lines are joined back into their paragraph, which is
  cut on Chinese (。！？；) and English (. ! ? ; then a space) ends
  and on line breaks, so ``3.3V`` or ``v5.15`` stay whole;
* a lead-in ending in a colon ("常见原因：", "depends on the SDO pin:") is
  joined with what follows it, which is where its content is;
* a table row becomes ``header: cell; header: cell`` so a row like
  ``| Flash | 512 KB |`` carries its column names; header rows are skipped;
* inside code, a comment line is joined with the code line it describes.

Each unit is scored by the share of the question's term weight it covers
(:func:`clawkb.retrieve.abstain.coverage`); a term missing from the sentence
but present in its section heading earns part of its weight (the heading says
what "it" refers to), and lower-ranked passages pay a small penalty.

Only sentences that answer the question are kept: the best one, then others
that score at least :data:`KEEP_SHARE` of it *and* hold (themselves or through
their heading) the question's topic — the rarest question term the best
sentence holds. A sentence that shares only a common word with the question
(``输入`` in a pin-reset note, under a question about a regulator's input
voltage) is left out, however many passages there are.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from clawkb.answer.context import Passage
from clawkb.retrieve.abstain import Term
from clawkb.text import tokenize
from clawkb.text.injection import sanitize

__all__ = ["Sentence", "extract_answer", "render_extractive", "split_sentences"]

_END = re.compile(r"(?<=[。！？；])|(?<=[.!?;])\s+(?=\S)")
_MARKUP = re.compile(r"^\s*(?:#{1,6}\s+|[-*+]\s+|\d+[.)]\s+|>\s*)")
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}")
_STOPS = (".", "!", "?", ";", ":", "。", "！", "？", "；", "：")
_CJK_END = re.compile(r"[\u3400-\u9fff，、（）]$")
_COMMENT = re.compile(r"^\s*(?:#|//|/\*|--|;)\s*")
HEADING_WEIGHT = 0.5
RANK_PENALTY = 0.05
MIN_CHARS = 6
#: A further sentence must score at least this share of the best one.
KEEP_SHARE = 0.5
MAX_CHARS = 400


@dataclass(frozen=True)
class Sentence:
    """A candidate sentence: its text, the passage it came from and its score."""

    text: str
    n: int
    score: float


@dataclass(frozen=True)
class _Scored:
    sentence: Sentence
    #: question terms the sentence holds whole (their rarest token), itself or by its heading
    held: frozenset[str]


def split_sentences(text: str) -> list[str]:
    """Sentence units of a passage (see the module docstring), in reading order."""
    units: list[str] = []
    lines = text.splitlines()
    in_code = False
    header: list[str] | None = None
    pending_comment = ""
    para: list[str] = []  # prose lines, soft-wrapped ones joined
    for i, raw in enumerate(lines):
        if not raw.strip() or _FENCE.match(raw) or raw.lstrip().startswith("|"):
            units.extend(p.strip() for line in para for p in _END.split(line) if p.strip())
            para = []
        if _FENCE.match(raw):
            in_code, pending_comment = not in_code, ""
            continue
        if in_code:
            if _COMMENT.match(raw):
                pending_comment = _COMMENT.sub("", raw).strip()
            elif raw.strip():
                units.append(
                    f"{pending_comment}: {raw.strip()}" if pending_comment else raw.strip()
                )
                pending_comment = ""
            continue
        if raw.lstrip().startswith("|"):
            cells = [c.strip() for c in raw.strip().strip("|").split("|")]
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if _TABLE_RULE.match(nxt):
                header = cells
            elif not _TABLE_RULE.match(raw):
                units.append(_row(header, cells))
            continue
        header = None
        line = _MARKUP.sub("", raw).strip()
        if para and line and not _MARKUP.match(raw) and not para[-1].endswith(_STOPS):
            para[-1] += ("" if _CJK_END.search(para[-1]) else " ") + line  # soft-wrapped line
        elif line:
            para.append(line)
    units.extend(p.strip() for line in para for p in _END.split(line) if p.strip())
    return [u[:MAX_CHARS] for u in _join_lead_ins(units) if len(u) >= MIN_CHARS]


def _row(header: list[str] | None, cells: list[str]) -> str:
    if not header or len(header) != len(cells):
        return " | ".join(cells)
    return "; ".join(f"{h}: {c}" for h, c in zip(header, cells, strict=True) if c and c != "-")


def _join_lead_ins(units: list[str]) -> list[str]:
    out: list[str] = []
    for u in units:
        if out and out[-1].endswith((":", "：")):
            out[-1] = f"{out[-1]} {u}"
        else:
            out.append(u)
    return out


def extract_answer(
    passages: Sequence[Passage], terms: Sequence[Term], max_sentences: int = 3
) -> list[Sentence]:
    """The ``max_sentences`` best sentences over all passages, best first.

    With no scoring terms the first sentences of the best passage win, so the
    result is empty only for an empty context.
    """
    total = sum(t.weight for t in terms) or 1.0
    scored: list[tuple[float, int, _Scored]] = []
    for p in passages:
        heading = frozenset(tokenize(" ".join((*p.anchor.heading_path, p.title))))
        last_heading = p.anchor.heading_path[-1].strip() if p.anchor.heading_path else None
        for s in split_sentences(sanitize(p.text)):
            if s == last_heading:
                continue
            present = frozenset(tokenize(s))
            own = sum(t.credit(present) for t in terms)
            ctx = sum(t.credit(heading) for t in terms if t.credit(present) == 0)
            score = (own + HEADING_WEIGHT * ctx * (own > 0)) / total - RANK_PENALTY * (p.n - 1)
            held = frozenset(  # whole terms: GPIOB_MODER does not hold GPIOA_MODER's topic
                t.text
                for t in terms
                if set(t.tokens) <= present or (own > 0 and set(t.tokens) <= heading)
            )
            scored.append((score, len(scored), _Scored(Sentence(s, p.n, round(score, 4)), held)))
    scored.sort(key=lambda x: (-x[0], x[1]))
    return [c.sentence for c in _on_topic([c for _, _, c in scored], terms, max_sentences)]


def _on_topic(ranked: list[_Scored], terms: Sequence[Term], limit: int) -> list[_Scored]:
    """The best sentence, then those that score near it and hold its rarest question
    term (see the module docstring); duplicates dropped."""
    if not ranked:
        return []
    best = ranked[0]
    # the rarest term; on a tie the one of more parts (an identifier is the more specific)
    rank = {t.text: (t.weight, len(t.tokens)) for t in terms}
    topic = max(sorted(best.held), key=lambda t: rank[t], default=None)
    out: list[_Scored] = []
    seen: set[str] = set()
    for cand in ranked:
        if len(out) >= limit:
            break
        if cand.sentence.text in seen:
            continue
        if (
            out
            and topic is not None
            and (topic not in cand.held or cand.sentence.score < KEEP_SHARE * best.sentence.score)
        ):
            continue
        seen.add(cand.sentence.text)
        out.append(cand)
    return out


def render_extractive(sentences: Sequence[Sentence]) -> str:
    """One cited sentence per line: ``sentence [n]``."""
    return "\n".join(f"{s.text} [{s.n}]" for s in sentences)
