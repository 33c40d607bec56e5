"""Load a retrieval test set in the BEIR folder layout.

A dataset folder holds ``corpus.jsonl`` (``{"_id", "title", "text"}``),
``queries.jsonl`` (``{"_id", "text"}``) and ``qrels.tsv`` (header
``query-id corpus-id score``, integer grades) — or, as BEIR ships its sets,
``qrels/test.tsv``. Only queries with at least one
positive judgement are kept: a query nobody can answer scores 0 on every
metric and would only dilute the means. Errors name the file and line so a
hand-made dataset can be fixed quickly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawkb.errors import ConfigError, NotFoundError

CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"
QRELS_FILE = "qrels.tsv"
#: where BEIR's own downloads keep the test judgements
BEIR_QRELS_FILE = "qrels/test.tsv"


@dataclass(frozen=True, slots=True)
class BeirDoc:
    """One corpus document."""

    id: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class BeirQuery:
    """One test query with its graded judgements (``doc_id -> grade``)."""

    id: str
    text: str
    qrels: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BeirDataset:
    """A loaded dataset: documents in file order, judged queries in file order."""

    name: str
    folder: Path
    docs: tuple[BeirDoc, ...]
    queries: tuple[BeirQuery, ...]


def load_beir(folder: str | Path) -> BeirDataset:
    """Read a BEIR-layout folder; raises NotFoundError / ConfigError on bad input."""
    root = Path(folder)
    if not root.is_dir():
        raise NotFoundError(f"dataset folder not found: {root}")
    qrels_path = root / QRELS_FILE
    if not qrels_path.is_file() and (root / BEIR_QRELS_FILE).is_file():
        qrels_path = root / BEIR_QRELS_FILE
    qrels = load_qrels(_require(root, qrels_path.relative_to(root).as_posix()))
    texts = load_queries(_require(root, QUERIES_FILE))
    docs = load_corpus(_require(root, CORPUS_FILE))
    queries = tuple(
        BeirQuery(id=qid, text=text, qrels=qrels[qid])
        for qid, text in texts.items()
        if any(grade > 0 for grade in qrels.get(qid, {}).values())
    )
    if not queries:
        raise ConfigError(
            f"{root}: no query in {QUERIES_FILE} has a positive judgement in"
            f" {qrels_path.relative_to(root).as_posix()}"
        )
    return BeirDataset(name=root.resolve().name, folder=root, docs=docs, queries=queries)


def _require(root: Path, name: str) -> Path:
    path = root / name
    if not path.is_file():
        raise NotFoundError(
            f"{path}: missing (a BEIR dataset needs {CORPUS_FILE}, {QUERIES_FILE}"
            f" and {QRELS_FILE} or {BEIR_QRELS_FILE})"
        )
    return path


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line of a JSON-lines file."""
    with path.open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path} line {number}: not valid JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise ConfigError(f"{path} line {number}: expected a JSON object")
            yield number, obj


def _field(path: Path, number: int, obj: dict[str, Any], key: str, *, required: bool) -> str:
    value = obj.get(key)
    if value is None:
        if required:
            raise ConfigError(f"{path} line {number}: missing {key!r}")
        return ""
    if key == "_id" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # some converters write numeric ids
    if not isinstance(value, str):
        raise ConfigError(f"{path} line {number}: {key!r} must be a string")
    return value


def load_corpus(path: Path) -> tuple[BeirDoc, ...]:
    """Documents of ``corpus.jsonl``; a duplicated id is an error, not a silent overwrite."""
    docs: list[BeirDoc] = []
    seen: set[str] = set()
    for number, obj in _json_lines(path):
        doc_id = _field(path, number, obj, "_id", required=True)
        if doc_id in seen:
            raise ConfigError(f"{path} line {number}: duplicate _id {doc_id!r}")
        seen.add(doc_id)
        title = _field(path, number, obj, "title", required=False)
        docs.append(
            BeirDoc(id=doc_id, title=title, text=_field(path, number, obj, "text", required=True))
        )
    if not docs:
        raise ConfigError(f"{path}: no documents")
    return tuple(docs)


def load_queries(path: Path) -> dict[str, str]:
    """Query id -> text, in file order."""
    queries: dict[str, str] = {}
    for number, obj in _json_lines(path):
        qid = _field(path, number, obj, "_id", required=True)
        queries[qid] = _field(path, number, obj, "text", required=True)
    return queries


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Query id -> {doc id -> grade} from a tab-separated file with a header row."""
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            cols = line.rstrip("\r\n").split("\t")
            if number == 1 and cols[:1] == ["query-id"]:
                continue
            if len(cols) != 3:
                raise ConfigError(
                    f"{path} line {number}: expected 3 tab-separated columns "
                    f"(query-id, corpus-id, score), got {len(cols)}"
                )
            qid, doc_id, raw = (col.strip() for col in cols)
            qrels.setdefault(qid, {})[doc_id] = _grade(path, number, raw)
    if not qrels:
        raise ConfigError(f"{path}: no judgements")
    return qrels


def _grade(path: Path, number: int, raw: str) -> int:
    """An integer grade; ``"2.0"`` is accepted, ``"0.5"`` is not (grades are levels)."""
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{path} line {number}: score {raw!r} is not a number") from None
    if not value.is_integer():
        raise ConfigError(f"{path} line {number}: score {raw!r} must be an integer grade")
    return int(value)
