"""Query rewriting: alias expansion from the hardware tables (no model needed), and
LLM variants plus a HyDE pseudo-passage when a model is configured and enabled.

Alias expansion: a query naming a pin alias ("red LED") gains the pin it maps
to and the row's other cells; a query naming a pin ("PA5") gains its aliases.

LLM rewriting asks the configured chat model once for 2–3 reworded variants
and a short passage that would answer the query (HyDE, for the dense
channel). It runs under a time budget: over budget, or on any model error,
the original query is used alone. Answers are cached per (model, query) in
memory and in ``<kb>/cache/rewrite.json``.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawkb.hardware.aliases import is_pin, normalize_alias
from clawkb.store import hardware_repo

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase
    from clawkb.llm import ChatClient

MAX_VARIANTS = 3
_WORDS = re.compile(r"[\w.\-/]+")

PROMPT = (
    "Rewrite the search query for a technical knowledge base. Reply with JSON only: "
    '{"variants": [2 or 3 reworded queries, same language as the query], '
    '"hyde": "a short passage (2-3 sentences) that would answer the query"}.'
)


def alias_terms(conn: sqlite3.Connection, query: str, limit: int = 12) -> list[str]:
    """Terms the hardware alias tables add to ``query`` (pins for aliases, aliases for pins)."""
    words = _WORDS.findall(query)
    grams = {
        normalize_alias(" ".join(words[i : i + n])) for n in (1, 2, 3) for i in range(len(words))
    }
    grams.discard("")
    out: list[str] = []
    if not grams:
        return out
    for pin, extra in hardware_repo.pins_of_aliases(conn, tuple(grams)):
        out.append(pin)
        out.extend(str(v) for v in json.loads(extra or "{}").values() if v)
    pins = [w for w in words if is_pin(w)]
    if pins:
        out.extend(a.replace("_", " ") for a in hardware_repo.aliases_of_pins(conn, pins))
    have = {w.casefold() for w in words}
    return [t for t in dict.fromkeys(out) if t.casefold() not in have][:limit]


@dataclass
class Rewrite:
    query: str
    variants: list[str] = field(default_factory=list)
    hyde: str = ""
    took_ms: float = 0.0
    cached: bool = False
    note: str = ""  # why only the original query is used, when it is

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "variants": self.variants,
            "hyde": self.hyde,
            "took_ms": round(self.took_ms, 1),
            "cached": self.cached,
            "note": self.note,
        }


def parse_reply(text: str, query: str) -> tuple[list[str], str]:
    """Variants and HyDE passage from a model reply (JSON, possibly fenced)."""
    body = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object in the reply")
    data = json.loads(body[start : end + 1])
    raw = data.get("variants") if isinstance(data, dict) else None
    raw = raw if isinstance(raw, list) else []
    variants = [v.strip() for v in raw if isinstance(v, str) and v.strip()]
    variants = [v for v in dict.fromkeys(variants) if v.casefold() != query.casefold()]
    hyde = data.get("hyde") if isinstance(data, dict) else ""
    return variants[:MAX_VARIANTS], hyde.strip() if isinstance(hyde, str) else ""


class LLMRewriter:
    """Variants + HyDE from a chat client (``clawkb.llm.ChatClient``), bounded and cached."""

    def __init__(self, client: ChatClient, budget_s: float, cache_file: Path | None = None) -> None:
        self.client = client
        self.budget_s = budget_s
        self.cache_file = cache_file
        self.cache: dict[str, dict[str, Any]] = {}
        if cache_file and cache_file.is_file():
            try:
                self.cache = json.loads(cache_file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                self.cache = {}

    def _key(self, query: str) -> str:
        return f"{getattr(self.client, 'name', 'llm')}\0{query}"

    def rewrite(self, query: str) -> Rewrite:
        t0 = time.perf_counter()
        hit = self.cache.get(self._key(query))
        if hit is not None:
            return Rewrite(query, list(hit["variants"]), hit["hyde"], 0.0, True)
        box: dict[str, Any] = {}

        def call() -> None:
            try:
                messages: Sequence[dict[str, str]] = (
                    {"role": "system", "content": PROMPT},
                    {"role": "user", "content": query},
                )
                box["reply"] = self.client.chat(messages).text
            except Exception as exc:  # any model failure: fall back to the query
                box["error"] = f"{type(exc).__name__}: {exc}"

        worker = threading.Thread(target=call, daemon=True)
        worker.start()
        worker.join(self.budget_s)
        took = (time.perf_counter() - t0) * 1000
        if worker.is_alive():
            return Rewrite(query, took_ms=took, note=f"over the {self.budget_s:g} s budget")
        if "error" in box:
            return Rewrite(query, took_ms=took, note=f"model failed ({box['error']})")
        try:
            variants, hyde = parse_reply(box["reply"], query)
        except ValueError:
            return Rewrite(query, took_ms=took, note="model reply was not JSON")
        self.cache[self._key(query)] = {"variants": variants, "hyde": hyde}
        self._save()
        return Rewrite(query, variants, hyde, took)

    def _save(self) -> None:
        if not self.cache_file:
            return
        try:
            self.cache_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.cache_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.cache, ensure_ascii=False), encoding="utf-8")
            tmp.replace(self.cache_file)
        except OSError:
            pass  # a cache that cannot be written is only slower


def rewriter_for(kb: KnowledgeBase) -> LLMRewriter | None:
    """The KB's rewriter when ``knowledge.rewrite`` is on and a model is configured."""
    if not kb.config.knowledge.rewrite:
        return None
    from clawkb.llm import load_llm_settings, make_client

    client = make_client(load_llm_settings(kb.config))
    if client is None:
        return None
    return LLMRewriter(
        client, kb.config.knowledge.rewrite_budget_s, kb.home / "cache" / "rewrite.json"
    )
