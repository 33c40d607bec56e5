"""The bundled zh↔en engineering glossary and term lookup in both directions.

``zh_en.tsv`` (shipped with the package) holds one translation pair per line:
``zh <TAB> en <TAB> domain [<TAB> weight]`` — electronics, embedded, OS,
networking, software, PCB and power, memory/DDR, protocols, tooling, hardware
bring-up and general engineering physics. A term with several translations has
several lines. The optional weight (0, 1] scales how strongly that pair may
expand a query (1 when empty).

:meth:`Glossary.find` locates the glossary terms a text contains: Chinese
terms of two or more characters anywhere in a CJK run, English terms as whole
word sequences (``bus`` is not found in ``busy``). A match inside a longer
match of the same language is dropped, so ``电源管理芯片`` gives the PMIC and
not also "power supply". Single-character Chinese terms are only looked up in
the English → Chinese direction: as a substring they would match nearly every
sentence.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from clawkb.errors import ConfigError
from clawkb.text.tokenize import normalize

__all__ = ["Glossary", "Match", "Pair", "bundled_glossary", "load_glossary"]

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"[a-z0-9][a-z0-9.+#/'-]*[a-z0-9+#]|[a-z0-9]")
_MAX_EN_WORDS = 6
#: Texts whose matches :meth:`Glossary.find` keeps (oldest dropped first).
_FOUND_KEPT = 256


@dataclass(frozen=True)
class Pair:
    zh: str
    en: str
    domain: str
    weight: float = 1.0


@dataclass(frozen=True)
class Match:
    """A glossary term found in a text, with its translations and their pair weights."""

    term: str
    lang: str  # language of ``term``: "zh" or "en"
    start: int
    end: int
    translations: tuple[tuple[str, float], ...]


class Glossary:
    """Both lookup directions over a list of :class:`Pair`."""

    def __init__(self, pairs: list[Pair]) -> None:
        self.pairs = pairs
        self.zh_to_en: dict[str, list[tuple[str, float]]] = {}
        self.en_to_zh: dict[str, list[tuple[str, float]]] = {}
        for p in pairs:
            self.zh_to_en.setdefault(p.zh, []).append((p.en, p.weight))
            self.en_to_zh.setdefault(p.en, []).append((p.zh, p.weight))
        self._max_zh = max((len(z) for z in self.zh_to_en), default=0)
        self._max_en = min(
            _MAX_EN_WORDS, max((len(_WORD.findall(e)) for e in self.en_to_zh), default=0)
        )
        self._en_key = {" ".join(_WORD.findall(e)): e for e in self.en_to_zh}
        # first two characters of every Chinese term and first word of every English
        # key: positions where no term can start are skipped without slicing
        self._zh_heads = frozenset(z[:2] for z in self.zh_to_en if len(z) > 1)
        self._en_heads = frozenset(k.split(" ", 1)[0] for k in self._en_key)
        self._found: dict[str, tuple[Match, ...]] = {}

    def __len__(self) -> int:
        return len(self.pairs)

    def find(self, text: str) -> list[Match]:
        """Glossary terms in ``text`` (normalised here), longest first, no nested ones.

        A search looks up its query several times (rewrite, the cross-lingual check,
        the not-found decision): the last :data:`_FOUND_KEPT` answers are kept."""
        kept = self._found.get(text)
        if kept is None:
            kept = self._found[text] = tuple(self._find(text))
            if len(self._found) > _FOUND_KEPT:  # threads may race here: any one drop will do
                with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                    del self._found[next(iter(self._found))]
        return list(kept)

    def _find(self, text: str) -> list[Match]:
        norm = normalize(text)
        found: list[Match] = []
        for run in _CJK_RUN.finditer(norm):
            s = run.group()
            heads = self._zh_heads
            for i in range(len(s)):
                if s[i : i + 2] not in heads:
                    continue
                for j in range(min(len(s), i + self._max_zh), i + 1, -1):
                    hits = self.zh_to_en.get(s[i:j])
                    if hits:
                        start = run.start() + i
                        found.append(Match(s[i:j], "zh", start, start + j - i, tuple(hits)))
        # words glued to others by "_" are identifier parts (FROBNICATE_TIMEOUT_MS): not terms
        words = [w for w in _WORD.finditer(norm) if not _in_identifier(norm, w.start(), w.end())]
        en_heads = self._en_heads
        for i in range(len(words)):
            first = words[i].group()
            if first not in en_heads and first[:-1] not in en_heads:
                continue  # no key starts with this word (nor, singular, is one)
            for n in range(min(self._max_en, len(words) - i), 0, -1):
                key = " ".join(w.group() for w in words[i : i + n])
                term = self._en_key.get(key)
                if term is None and key.endswith("s") and len(key) > 3:
                    term = self._en_key.get(key[:-1])  # plural: "resistors", "backends"
                if term is not None:
                    found.append(
                        Match(
                            term,
                            "en",
                            words[i].start(),
                            words[i + n - 1].end(),
                            tuple(self.en_to_zh[term]),
                        )
                    )
        return _outermost(found)


def _in_identifier(text: str, start: int, end: int) -> bool:
    return (start > 0 and text[start - 1] == "_") or (end < len(text) and text[end] == "_")


def _outermost(found: list[Match]) -> list[Match]:
    """Drop matches lying inside a longer match of the same language."""
    found.sort(key=lambda m: (m.start, -(m.end - m.start)))
    out: list[Match] = []
    for m in found:
        if any(o.lang == m.lang and o.start <= m.start and m.end <= o.end for o in out):
            continue
        out.append(m)
    return out


def load_glossary(path: Path | str) -> Glossary:
    """Read a glossary TSV; a bad line is an error naming the file and line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the glossary ({exc})") from exc
    return Glossary(parse_tsv(text, str(p)))


def parse_tsv(text: str, origin: str) -> list[Pair]:
    pairs: list[Pair] = []
    for no, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.startswith("#") or raw.startswith("zh\t"):
            continue
        cols = raw.split("\t")
        if len(cols) < 3 or not cols[0].strip() or not cols[1].strip():
            raise ConfigError(f"{origin}:{no}: expected 'zh<TAB>en<TAB>domain[<TAB>weight]'")
        zh, en, domain = (normalize(c.strip()) for c in cols[:3])
        if not _CJK.search(zh) or _CJK.search(en):
            raise ConfigError(f"{origin}:{no}: first column must be Chinese, second English")
        weight = 1.0
        if len(cols) > 3 and cols[3].strip():
            try:
                weight = float(cols[3])
            except ValueError:
                raise ConfigError(f"{origin}:{no}: weight {cols[3]!r} is not a number") from None
            if not 0 < weight <= 1:
                raise ConfigError(f"{origin}:{no}: weight must be in (0, 1], got {weight}")
        pairs.append(Pair(zh, en, domain, weight))
    return pairs


@lru_cache(maxsize=1)
def bundled_glossary() -> Glossary:
    """The glossary shipped in the package (read once per process)."""
    res = resources.files(__name__).joinpath("zh_en.tsv")
    return Glossary(parse_tsv(res.read_text(encoding="utf-8"), "clawkb/text/glossary/zh_en.tsv"))
