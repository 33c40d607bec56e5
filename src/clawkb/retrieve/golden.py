"""Golden queries: a small hand-written list of "this query must find that file".

A ``golden.yaml`` next to a knowledge base pins down the searches its users
rely on, so a tokenizer, chunker or ranking change that breaks them fails
``clawkb check`` (exit code 1) instead of surprising someone later::

    k: 3                 # a query passes when an expected hit is in the top k
    threshold: 0.9       # the run passes when hit@k >= threshold
    queries:
      - query: "DDR 走线阻抗"
        expect_path: "ddr-layout.md"   # hit path ends with this ('/'-separated)
        expect_heading: "阻抗"          # optional, case-insensitive substring
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from clawkb.errors import ConfigError, NotFoundError
from clawkb.types import Hit

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

DEFAULT_K = 3
DEFAULT_THRESHOLD = 0.9

#: Hits fetched per query beyond k, so a failing query can say where the
#: expected document actually ranked.
SEARCH_DEPTH = 20

_ENTRY_KEYS = {"query", "expect_path", "expect_heading"}


@dataclass(frozen=True, slots=True)
class GoldenQuery:
    query: str
    expect_path: str
    expect_heading: str | None = None

    def matches(self, hit: Hit) -> bool:
        """True when ``hit`` is the expected path (and heading, if one is given)."""
        path = hit.anchor.path.replace("\\", "/")
        want = self.expect_path.replace("\\", "/").lstrip("/")
        if path != want and not path.endswith("/" + want):
            return False
        if self.expect_heading is None:
            return True
        heading = " > ".join(hit.anchor.heading_path).casefold()
        return self.expect_heading.casefold() in heading


@dataclass(frozen=True, slots=True)
class GoldenSet:
    k: int
    threshold: float
    queries: tuple[GoldenQuery, ...]


@dataclass(frozen=True, slots=True)
class GoldenResult:
    """One query's outcome; ``rank`` is 1-based and may exceed k (then it failed)."""

    query: GoldenQuery
    passed: bool
    rank: int | None
    top_paths: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query.query,
            "expect_path": self.query.expect_path,
            "expect_heading": self.query.expect_heading,
            "passed": self.passed,
            "rank": self.rank,
            "top_paths": list(self.top_paths),
        }


@dataclass(frozen=True, slots=True)
class GoldenReport:
    k: int
    threshold: float
    results: tuple[GoldenResult, ...]

    @property
    def hits(self) -> int:
        return sum(1 for r in self.results if r.passed)

    @property
    def hit_at_k(self) -> float:
        return self.hits / len(self.results) if self.results else 0.0

    @property
    def passed(self) -> bool:
        return self.hit_at_k >= self.threshold

    @property
    def failures(self) -> tuple[GoldenResult, ...]:
        return tuple(r for r in self.results if not r.passed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "threshold": self.threshold,
            "hit_at_k": round(self.hit_at_k, 6),
            "hits": self.hits,
            "total": len(self.results),
            "passed": self.passed,
            "results": [r.to_dict() for r in self.results],
        }


def load_golden(path: str | Path) -> GoldenSet:
    """Parse and validate a golden file; every problem names the file (and entry)."""
    file, data = read_golden_mapping(path)
    k = _positive_int(file, data.get("k", DEFAULT_K))
    threshold = _fraction(file, data.get("threshold", DEFAULT_THRESHOLD))
    entries = data.get("queries")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{file}: 'queries' must be a non-empty list")
    queries = tuple(_entry(file, number, e) for number, e in enumerate(entries, start=1))
    return GoldenSet(k=k, threshold=threshold, queries=queries)


def read_golden_mapping(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """The top-level mapping of a golden YAML file; a missing, unreadable or non-mapping
    file is one error naming it (shared by the hardware golden format)."""
    file = Path(path)
    if not file.is_file():
        raise NotFoundError(f"golden file not found: {file}")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{file}: not valid YAML ({_yaml_problem(exc)})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{file}: not UTF-8 text") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: expected a mapping with a 'queries' list")
    return file, data


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or "syntax error"
    return f"line {mark.line + 1}: {problem}" if mark is not None else str(problem)


def _positive_int(file: Path, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{file}: 'k' must be a positive integer, got {value!r}")
    return value


def _fraction(file: Path, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(f"{file}: 'threshold' must be a number within 0..1, got {value!r}")
    return float(value)


def _entry(file: Path, number: int, entry: object) -> GoldenQuery:
    where = f"{file}: queries entry {number}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping with 'query' and 'expect_path'")
    unknown = sorted(set(map(str, entry)) - _ENTRY_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
    for key in ("query", "expect_path"):
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            raise ConfigError(f"{where}: missing or empty {key!r}")
    heading = entry.get("expect_heading")
    if heading is not None and (not isinstance(heading, str) or not heading.strip()):
        raise ConfigError(f"{where}: 'expect_heading' must be a non-empty string")
    return GoldenQuery(entry["query"], entry["expect_path"].strip(), heading)


def check_golden(
    kb: KnowledgeBase, path: str | Path, *, k: int | None = None, threshold: float | None = None
) -> GoldenReport:
    """Run every golden query against ``kb``; ``k``/``threshold`` override the file."""
    golden = load_golden(path)
    k = golden.k if k is None else _positive_int(Path(path), k)
    threshold = golden.threshold if threshold is None else _fraction(Path(path), threshold)
    results = tuple(_check_one(kb, q, k) for q in golden.queries)
    return GoldenReport(k=k, threshold=threshold, results=results)


def _check_one(kb: KnowledgeBase, query: GoldenQuery, k: int) -> GoldenResult:
    hits = sorted(kb.search(query.query, limit=max(k, SEARCH_DEPTH)).hits, key=lambda h: h.rank)
    rank = next((pos for pos, hit in enumerate(hits, start=1) if query.matches(hit)), None)
    return GoldenResult(
        query=query,
        passed=rank is not None and rank <= k,
        rank=rank,
        top_paths=tuple(hit.anchor.path for hit in hits[:k]),
    )
