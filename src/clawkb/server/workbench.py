"""The page's workbench endpoints: the KB's search settings and its golden queries.

* ``GET /api/v1/settings`` — the effective ``retrieval:`` and ``answer:`` settings with
  where each came from; ``PUT`` writes changes into the KB's ``config.yaml`` after
  checking the whole file against the one settings model (:class:`clawkb.config.Config`),
  so an unknown key or a bad value is refused with the CLI's message and nothing is
  written. Only these two sections may be changed from the page: the server's own
  settings (roots, tokens, limits) stay in the file's owner's hands.
* ``/api/v1/golden`` — the golden file (``knowledge.golden``, else ``golden.yaml`` in
  the KB folder): list, add an entry, remove one, run ``check``.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from clawkb.errors import ConfigError
from clawkb.server.api_read import state_of

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

router = APIRouter(prefix="/api/v1", tags=["workbench"])

#: Sections the page may write, and in them the keys that only tune ranking. Keys that
#: name files, endpoints or models (synonyms, rerank endpoint options, translate, ...)
#: stay in the hands of whoever edits config.yaml: a page must not point the server at
#: another host or file.
EDITABLE = ("retrieval", "answer")
TUNABLE = {
    "retrieval": {
        "mode", "fusion", "rrf_k", "w_lexical", "w_dense", "w_recency", "norm", "candidates",
        "early_return", "merge", "merge_ratio", "min_confidence", "glossary", "glossary_share",
        "adaptive", "rerank_depth", "rerank_min_score", "half_life_days",
    },
    "answer": {"min_confidence", "context_tokens", "role"},
}  # fmt: skip
_file_lock = threading.Lock()


class SettingsIn(BaseModel):
    settings: dict[str, dict[str, Any]] = Field(
        description="Sections to change, e.g. {'retrieval': {'mode': 'hybrid', 'w_dense': 0.5}};"
        " a null value removes the key (back to its default)."
    )


def _write_yaml(path: Path, data: object) -> None:
    text = yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _settings_view(kb: KnowledgeBase) -> dict[str, Any]:
    from clawkb.config.load import effective

    rows = effective(kb.config)
    return {
        "file": (kb.home / "config.yaml").as_posix(),
        "settings": {
            k: {"value": v, "source": s} for k, v, s in rows if k.split(".")[0] in EDITABLE
        },
    }


@router.get("/settings", summary="Effective retrieval and answer settings, with their source")
async def get_settings(request: Request) -> dict[str, Any]:
    return await state_of(request).runtime.read(_settings_view)


@router.put("/settings", summary="Change retrieval/answer settings in the KB's config.yaml")
async def put_settings(request: Request, body: SettingsIn) -> dict[str, Any]:
    from clawkb.config.load import build_config, read_yaml

    st = state_of(request)
    bad = sorted(set(body.settings) - set(EDITABLE))
    if bad:
        raise ConfigError(
            f"settings: section {bad[0]!r} cannot be changed here (only {', '.join(EDITABLE)})"
        )
    path = st.runtime.home / "config.yaml"
    with _file_lock:
        data = read_yaml(path) if path.exists() else {}
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of settings")
        for section, values in body.settings.items():
            current = data.get(section) or {}
            if not isinstance(current, dict):
                raise ConfigError(f"{path}: '{section}' must be a mapping of settings")
            for key, value in values.items():
                if value is None:
                    current.pop(key, None)
                else:
                    current[key] = value
            if current:
                data[section] = current
            else:
                data.pop(section, None)
        build_config({str(path): data})  # the one model: unknown keys, types, value rules
        for section, values in body.settings.items():
            fixed = sorted(set(values) - TUNABLE[section])
            if fixed:  # a known key (unknown ones failed above) that tunes more than ranking
                raise ConfigError(
                    f"settings: {section}.{fixed[0]} cannot be changed from the page"
                    f" (edit {path.name}); the page may change {', '.join(sorted(TUNABLE[section]))}"
                )
        _write_yaml(path, data)
    st.runtime.reload_config()
    return await st.runtime.read(_settings_view)


# -- golden queries -------------------------------------------------------------------
class GoldenIn(BaseModel):
    query: str = Field(min_length=1, max_length=1000)
    expect_path: str = Field(min_length=1, max_length=1000)
    expect_heading: str | None = Field(default=None, max_length=1000)


class GoldenRemove(BaseModel):
    index: int = Field(ge=0, description="0-based position in the list")


def golden_path(kb: KnowledgeBase) -> Path:
    name = kb.config.knowledge.golden
    return (kb.home.parent / name).resolve() if name else kb.home / "golden.yaml"


def _golden_data(path: Path) -> dict[str, Any]:
    from clawkb.retrieve.golden import DEFAULT_K, DEFAULT_THRESHOLD, read_golden_mapping

    if not path.exists():
        return {"k": DEFAULT_K, "threshold": DEFAULT_THRESHOLD, "queries": []}
    _, data = read_golden_mapping(path)
    data.setdefault("queries", [])
    if not isinstance(data["queries"], list):
        raise ConfigError(f"{path}: 'queries' must be a list")
    return data


@router.get("/golden", summary="The KB's golden queries")
async def golden_list(request: Request) -> dict[str, Any]:
    def run(kb: KnowledgeBase) -> dict[str, Any]:
        path = golden_path(kb)
        return {"file": path.as_posix(), **_golden_data(path)}

    return await state_of(request).runtime.read(run)


async def _edit_golden(
    request: Request, change: Callable[[list[dict[str, Any]]], None]
) -> dict[str, Any]:
    from clawkb.retrieve.golden import load_golden

    st = state_of(request)
    path = await st.runtime.read(golden_path)
    with _file_lock:
        data = _golden_data(path)
        change(data["queries"])
        if data["queries"]:
            path.parent.mkdir(parents=True, exist_ok=True)
            old = path.read_bytes() if path.exists() else None
            _write_yaml(path, data)
            try:
                load_golden(path)  # the CLI's own checks, on what was written
            except ConfigError:
                if old is None:
                    path.unlink()
                else:
                    path.write_bytes(old)
                raise
        elif path.exists():
            path.unlink()
    return {"file": path.as_posix(), **data}


@router.post("/golden", summary="Add a golden query (e.g. from a hit)")
async def golden_add(request: Request, body: GoldenIn) -> dict[str, Any]:
    entry = {"query": body.query.strip(), "expect_path": body.expect_path.strip()}
    if body.expect_heading and body.expect_heading.strip():
        entry["expect_heading"] = body.expect_heading.strip()

    def change(queries: list[Any]) -> None:
        if entry in queries:
            raise ConfigError(
                f"golden: {entry['query']!r} → {entry['expect_path']} is already listed"
            )
        queries.append(entry)

    return await _edit_golden(request, change)


@router.post("/golden/remove", summary="Remove a golden query by position")
async def golden_remove(request: Request, body: GoldenRemove) -> dict[str, Any]:
    def change(queries: list[Any]) -> None:
        if body.index >= len(queries):
            raise ConfigError(f"golden: no entry {body.index} (there are {len(queries)})")
        del queries[body.index]

    return await _edit_golden(request, change)


@router.post("/golden/check", summary="Run the golden queries (clawkb check)")
async def golden_check(request: Request) -> dict[str, Any]:
    from clawkb.retrieve.golden import check_golden

    def run(kb: KnowledgeBase) -> dict[str, Any]:
        path = golden_path(kb)
        return {"file": path.as_posix(), **check_golden(kb, path).to_dict()}

    return await state_of(request).runtime.read(run)
