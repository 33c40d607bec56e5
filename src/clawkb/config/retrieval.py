"""The ``retrieval:`` settings: every fusion weight, stage budget and their value rules.

They belong to the configuration layer: :mod:`clawkb.config` builds the
``retrieval:`` section of config.yaml from :class:`RetrievalSettings`, and
:mod:`clawkb.retrieve.settings` reads a :class:`~clawkb.config.Config` into one.
The defaults are the ones that won the fusion sweep on the shared datasets
(bench/results/fusion-sweep.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from clawkb.errors import ConfigError

if TYPE_CHECKING:
    from clawkb.config import Config

__all__ = [
    "FUSIONS",
    "MODES",
    "REMOTE_MIN_CONFIDENCE",
    "RetrievalSettings",
    "apply_settings",
    "from_config",
]

MODES = ("auto", "lexical", "dense", "hybrid")
#: The Milvus backend's abstain rule (max of term share and mapped cosine below this):
#: it keeps no term statistics for the fitted model (clawkb.retrieve.notfound).
REMOTE_MIN_CONFIDENCE = 0.75
FUSIONS = ("rrf", "linear")


@dataclass(frozen=True)
class RetrievalSettings:
    mode: str = "auto"  # auto = hybrid once vectors exist, else lexical
    fusion: str = "rrf"
    rrf_k: int = 20  # k=20 beat k=60 on the shared sets (bench/results/fusion-sweep.md)
    w_lexical: float = 1.0  # RRF weights and linear α
    w_dense: float = 1.0  # RRF weights and linear β
    w_recency: float = 0.0  # linear γ
    norm: str = "minmax"
    half_life_days: float = 180.0
    candidates: int = 100  # per channel, before fusion
    early_return: float = 0.5  # lexical top-1 relative margin that skips dense; 0 = never
    rerank: str = ""  # "" | dense | endpoint | onnx
    rerank_depth: int = 20
    rerank_min_score: float | None = None
    merge: bool | None = None  # None: merge in dense and hybrid modes, not in lexical
    merge_ratio: float = 0.8
    # threshold on P(answerable) (clawkb.retrieve.notfound); None = the fitted model's own
    min_confidence: float | None = None
    budget_lexical_ms: float = 1000.0
    budget_dense_ms: float = 2000.0
    budget_rerank_ms: float = 3000.0
    cache_size: int = 256
    cache_ttl_s: float = 300.0
    synonyms: str = ""  # path; default <kb>/synonyms.txt when present
    glossary: bool = True  # zh<->en glossary expansion (clawkb.text.glossary)
    glossary_share: float = 0.5  # best translated passage vs best own-words passage (crossling)
    adaptive: bool = True  # query-adaptive fusion weights (clawkb.retrieve.adaptive)
    headings: bool = True  # a query that is a section title lifts that section (headings.py)
    # both coverages (query in heading, heading in query) must reach this to lift a passage
    headings_floor: float = 0.8
    titles: bool = True  # the query against section titles in the model's space (titles.py)
    title_lead: bool = True  # a title in the other language than the query leads (titles.lead)
    exact: bool = True  # passages with the query's rare identifiers stay on top (exact.py)
    translate: bool = False  # translate the query with the configured LLM (crossling)
    budget_translate_ms: float = 1500.0
    ann_threshold: int = 50_000
    extra: dict[str, Any] = field(default_factory=dict)  # rerank endpoint options etc.

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(
                f"retrieval mode must be one of {', '.join(MODES)}, got {self.mode!r}"
            )
        if self.fusion not in FUSIONS:
            raise ConfigError(f"fusion must be one of {', '.join(FUSIONS)}, got {self.fusion!r}")
        if self.norm not in ("minmax", "zscore"):
            raise ConfigError(f"fusion norm must be minmax or zscore, got {self.norm!r}")
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(
                    f"retrieval setting {f.name} must be a finite number, got {value}"
                )
        if min(self.w_lexical, self.w_dense, self.w_recency) < 0:
            raise ConfigError("fusion weights w_lexical, w_dense and w_recency must be >= 0")
        if not 0.0 <= self.headings_floor <= 1.0:
            raise ConfigError(
                f"retrieval headings_floor must be between 0 and 1, got {self.headings_floor}"
            )
        if self.candidates < 1 or self.rrf_k < 0:
            raise ConfigError("retrieval candidates must be >= 1 and rrf_k >= 0")
        if self.rerank:
            from clawkb.plugins import names

            kinds = names("clawkb.rerankers")
            if self.rerank not in kinds:
                raise ConfigError(f"rerank must be one of {', '.join(kinds)}, got {self.rerank!r}")

    def with_overrides(self, overrides: Mapping[str, Any]) -> RetrievalSettings:
        return apply_settings(self, {k: v for k, v in overrides.items() if v is not None}, "option")

    def cache_key(self) -> tuple[Any, ...]:
        # frozen: computed once per settings object (every search asks)
        key: tuple[Any, ...] | None = self.__dict__.get("_cache_key")
        if key is None:
            key = tuple(
                (f.name, repr(getattr(self, f.name))) for f in fields(self) if f.name != "extra"
            )
            object.__setattr__(self, "_cache_key", key)
        return key


def apply_settings(
    base: RetrievalSettings, data: Mapping[str, Any], origin: str
) -> RetrievalSettings:
    known = {f.name: f for f in fields(RetrievalSettings)}
    kwargs: dict[str, Any] = {}
    extra = dict(base.extra)
    for key, value in data.items():
        if key not in known or key == "extra":
            extra[key] = value
            continue
        default = getattr(RetrievalSettings(), key)
        try:
            if default is None or isinstance(value, type(default)):
                kwargs[key] = value
            elif isinstance(default, bool):
                kwargs[key] = str(value).lower() in ("1", "true", "yes", "on")
            else:
                kwargs[key] = type(default)(value)
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"{origin}: retrieval setting {key!r} has a bad value {value!r}"
            ) from exc
    return replace(base, **kwargs, extra=extra)


def from_config(config: Config) -> RetrievalSettings:
    """The ``retrieval:`` keys the configuration sets, over the defaults."""
    return apply_settings(RetrievalSettings(), config.explicit("retrieval"), "config.yaml")
