"""``clawkb eval --self``: golden queries made from the user's own knowledge base.

No judged set exists for someone's own docs, but three kinds of question have
an answer the KB itself names, and they are what engineers search for:

* ``section`` — a section title (the last heading of a chunk's path) should
  find that section: a hit in the same document under the same heading path.
  Titles shared by several documents ("Overview", "参数") are left out: their
  answer is ambiguous.
* ``identifier`` — an identifier (``CONFIG_FOO``, ``gpio_set_level``,
  ``0x4002_3800``, ``GPIOB_PUPDR``, ``ObserverEvent``, ``a.b.c``) found in
  exactly one document should find a chunk of that document that holds it.
* ``zh2en`` / ``en2zh`` — when a page exists in both languages (the same
  relative path under two language folders such as ``en/`` and ``zh_CN/``, or
  ``name.md`` beside ``name.zh.md``), one page's title should find the other.

Each kind is sampled deterministically (by a hash of the query, at most
``per_kind`` queries) and scored as hit@k per retrieval mode: ``lexical``,
``dense`` (when the KB has vectors) and the default mode — what a user gets.
A query the search answers with "no match" is a miss.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from clawkb.store.repo import ChunkRow
from clawkb.text.identifiers import identifiers
from clawkb.types import Hit

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

__all__ = ["SelfQuery", "SelfReport", "generate", "self_eval"]

KINDS = ("section", "identifier", "zh2en", "en2zh")
_CJK = re.compile(r"[\u3400-\u9fff]")
_LANG_DIRS = {"en", "en_us", "en-us", "zh", "zh_cn", "zh-cn", "cn", "zh_hans", "zh-hans", "chs"}
_LANG_SUFFIX = re.compile(r"\.(en|zh|zh_CN|zh-CN|cn)(?=\.[^.]+$)", re.IGNORECASE)
MIN_TITLE_CHARS = 4


@dataclass(frozen=True)
class SelfQuery:
    kind: str
    query: str
    #: the document the answer is in
    path: str
    #: section: the heading path the hit must have; identifier: the text it must hold
    heading_path: tuple[str, ...] = ()
    holds: str = ""


@dataclass
class SelfReport:
    k: int
    modes: list[str]
    #: kind -> mode -> hit@k
    table: dict[str, dict[str, float]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    #: per kind, a few queries the default mode missed (to show the user where it is weak)
    misses: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "modes": self.modes,
            "kinds": {
                kind: {"queries": self.counts[kind], "hit@k": self.table[kind]}
                for kind in self.table
            },
            "misses": self.misses,
            "seconds": round(self.seconds, 2),
        }


def _cjk_share(text: str) -> float:
    letters = [c for c in text if c.isalpha()]
    return sum(1 for c in letters if _CJK.match(c)) / len(letters) if letters else 0.0


def _pick(items: Iterable[SelfQuery], n: int) -> list[SelfQuery]:
    """``n`` queries chosen by a hash of their text: the same KB gives the same set."""
    uniq = {(q.kind, q.query): q for q in items}
    key = lambda q: hashlib.sha1(f"{q.kind}\0{q.query}".encode()).hexdigest()  # noqa: E731
    return sorted(uniq.values(), key=key)[:n]


def _page_key(path: str) -> tuple[str, str] | None:
    """(the path without its language marker, the language marker) or None."""
    p = PurePosixPath(path.replace("\\", "/"))
    parts = list(p.parts)
    for i, part in enumerate(parts[:-1]):
        if part.lower() in _LANG_DIRS:
            return "/".join(parts[:i] + parts[i + 1 :]), part.lower()
    m = _LANG_SUFFIX.search(p.name)
    if m:
        return str(p.with_name(_LANG_SUFFIX.sub("", p.name))), m.group(1).lower()
    return None


def generate(rows: Sequence[ChunkRow], per_kind: int = 50) -> dict[str, list[SelfQuery]]:
    """The golden queries of each kind from the KB's chunk rows (see the module docstring)."""
    sections: dict[str, set[tuple[str, tuple[str, ...]]]] = defaultdict(set)
    idents: dict[str, set[str]] = defaultdict(set)
    titles: dict[str, str] = {}
    for r in rows:
        if r.path.startswith("memory://"):
            continue
        if r.heading_path:
            sections[r.heading_path[-1].strip()].add((r.path, tuple(r.heading_path)))
            titles.setdefault(r.path, r.heading_path[0].strip())
        elif r.title:
            titles.setdefault(r.path, r.title.strip())
        for name in identifiers(r.text):
            idents[name].add(r.path)
    out: dict[str, list[SelfQuery]] = {}
    out["section"] = _pick(
        (
            SelfQuery("section", title, path, heading_path=hp)
            for title, where in sections.items()
            if len(where) == 1 and len(title) >= MIN_TITLE_CHARS and len({p for p, _ in where}) == 1
            for path, hp in where
        ),
        per_kind,
    )
    out["identifier"] = _pick(
        (
            SelfQuery("identifier", name, next(iter(paths)), holds=name)
            for name, paths in idents.items()
            if len(paths) == 1
        ),
        per_kind,
    )
    pages: dict[str, dict[str, str]] = defaultdict(dict)
    for path in titles:
        key = _page_key(path)
        if key is not None:
            pages[key[0]]["zh" if _cjk_share(titles[path]) > 0.3 else "en"] = path
    pairs = [(v["zh"], v["en"]) for v in pages.values() if {"zh", "en"} <= set(v)]
    out["zh2en"] = _pick(
        (SelfQuery("zh2en", titles[zh], en) for zh, en in pairs if len(titles[zh]) >= 2),
        per_kind,
    )
    out["en2zh"] = _pick(
        (SelfQuery("en2zh", titles[en], zh) for zh, en in pairs if len(titles[en]) >= 2),
        per_kind,
    )
    return {k: v for k, v in out.items() if v}


def _hit(q: SelfQuery, hit: Hit) -> bool:
    a = hit.anchor
    if a.path != q.path:
        return False
    if q.kind == "section":
        return tuple(a.heading_path[: len(q.heading_path)]) == q.heading_path
    if q.kind == "identifier":
        return q.holds in hit.text
    return True


def self_eval(kb: KnowledgeBase, *, k: int = 3, per_kind: int = 50) -> SelfReport:
    """Generate the golden queries from ``kb`` and score hit@k per kind and mode."""
    from clawkb.embed import vectors

    t0 = time.perf_counter()
    kb.ensure_fresh()
    rows = list(kb.repo.chunks_by_ids(kb.repo.all_chunk_ids()).values())
    queries = generate(rows, per_kind)
    has_vectors = vectors.stored_signature(kb.conn) is not None
    modes = ["lexical", "dense", "default"] if has_vectors else ["lexical", "default"]
    report = SelfReport(k, modes)
    for kind in KINDS:
        qs = queries.get(kind)
        if not qs:
            continue
        report.counts[kind] = len(qs)
        report.table[kind] = {}
        for mode in modes:
            found = 0
            for q in qs:
                res = kb.search(q.query, limit=k, mode=None if mode == "default" else mode)
                ok = any(_hit(q, h) for h in res.hits[:k])
                found += ok
                if not ok and mode == "default" and len(report.misses.setdefault(kind, [])) < 5:
                    report.misses[kind].append(q.query)
            report.table[kind][mode] = round(found / len(qs), 4)
    report.seconds = time.perf_counter() - t0
    return report
