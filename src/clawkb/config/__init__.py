"""Where the knowledge base lives and the one settings model it keeps.

Home resolution, in order: ``--kb DIR``, ``$CLAWKB_HOME``, a ``.clawkb`` folder
in the current directory or any parent, else ``./.clawkb`` in the current
directory (created by the first write command, never a hidden user-data
folder).

Settings: :class:`Config` is the only schema. Every key of ``<home>/config.yaml``
and every ``CLAWKB_*`` environment variable is validated against it
(:mod:`clawkb.config.load`): an unknown key fails with the file and the closest
valid name, a bad value with the key and what was expected. Precedence:
defaults < ``config.yaml`` < environment. ``clawkb config`` prints the
effective values and where each came from.
"""

from __future__ import annotations

import os
import typing
from dataclasses import MISSING, dataclass, field, fields, make_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from annotated_types import Ge, Gt, Interval

from clawkb.config.retrieval import RetrievalSettings
from clawkb.errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

LOCAL_DIR = ".clawkb"


def find_home(cwd: Path | None = None) -> Path | None:
    """The nearest existing ``.clawkb`` folder from ``cwd`` upwards, or None."""
    here = (cwd or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / LOCAL_DIR).is_dir():
            return folder / LOCAL_DIR
    return None


def resolve_home(explicit: str | os.PathLike[str] | None = None, cwd: Path | None = None) -> Path:
    if explicit:
        return Path(explicit).expanduser().resolve()
    env = os.environ.get("CLAWKB_HOME")
    if env:
        return Path(env).expanduser().resolve()
    return find_home(cwd) or (cwd or Path.cwd()).resolve() / LOCAL_DIR


ENV_PREFIX = "CLAWKB_"
#: CLAWKB_* variables read elsewhere that are not settings (suffix after CLAWKB_).
NOT_SETTINGS = frozenset(
    {
        "HOME",
        "DATASETS",
        "FUZZ_EXAMPLES",
        "GC_FREEZE",
        "GIL_SWITCH_MS",
        "HTTP",
        "INDEX_WORKERS",
        "MALLOC",
        "MODEL_CACHE",
        "NO_NATIVE",
        "NO_OCR",
    }
)

#: Read by pydantic when :mod:`clawkb.config.load` validates a file or the
#: environment; this module never imports pydantic, so opening a KB with no
#: ``config.yaml`` costs no validation library at all.
STRICT = {"extra": "forbid", "allow_inf_nan": False}


def _check_retrieval(self: DataclassInstance) -> None:
    values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "rerank_options"}
    try:  # the runtime settings own the value rules (modes, fusions, rerankers, ...)
        RetrievalSettings(**values)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


def _retrieval_section() -> type:
    """``retrieval:`` — every field of :class:`RetrievalSettings` plus the reranker's options."""
    hints = typing.get_type_hints(RetrievalSettings)
    specs: list[Any] = [
        (f.name, hints[f.name], field(default=f.default))
        for f in fields(RetrievalSettings)
        if f.name != "extra" and f.default is not MISSING
    ]
    specs.append(("rerank_options", dict[str, Any], field(default_factory=dict)))
    namespace = {"__pydantic_config__": STRICT, "__post_init__": _check_retrieval}
    cls = make_dataclass("RetrievalSection", specs, frozen=True, namespace=namespace)
    cls.__module__ = __name__
    return cls


RetrievalSection = _retrieval_section()


@dataclass(frozen=True)
class EmbeddingSection:
    """``embedding: e5-small`` or ``embedding: {model: NAME, options: {...}}``."""

    __pydantic_config__ = STRICT
    model: str = "e5-small"
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LLMSettings:
    """``llm:`` — an OpenAI-compatible endpoint, an in-process GGUF, or a plugin client."""

    __pydantic_config__ = STRICT
    client: str = ""  # "" = openai when base_url is set, llama-cpp when gguf is set
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    gguf: str | None = None
    timeout_s: Annotated[float, Gt(0)] = 60.0
    retries: Annotated[int, Ge(0)] = 2
    backoff_s: Annotated[float, Ge(0)] = 0.5
    max_retry_after_s: Annotated[float, Ge(0)] = 30.0  # longest Retry-After honoured
    temperature: float = 0.1
    max_tokens: int = 512
    n_ctx: int = 4096

    @property
    def configured(self) -> bool:
        return bool(self.base_url or self.gguf or self.client)

    def describe(self) -> str:
        if self.gguf:
            return f"llama-cpp {self.gguf}"
        return f"{self.model or 'default'} @ {self.base_url}" if self.base_url else "none"


@dataclass(frozen=True)
class AnswerSection:
    """``answer:`` — defaults for ``ask`` (unset = the built-in role / calibrated threshold)."""

    __pydantic_config__ = STRICT
    role: str | None = None
    context_tokens: Annotated[int, Ge(100)] = 1800
    min_confidence: float | None = None


@dataclass(frozen=True)
class MemorySection:
    """``memory:`` — how recall weighs importance and age."""

    __pydantic_config__ = STRICT
    half_life_days: Annotated[float, Gt(0)] = 30.0
    recency_floor: Annotated[float, Interval(ge=0, le=1)] = 0.25


Trust = Literal["official", "team", "community", "learned", "memory"]


@dataclass(frozen=True)
class DomainWeights:
    """``knowledge.domain_weights.<domain>`` — fusion weights for searches routed to it."""

    __pydantic_config__ = STRICT
    w_lexical: Annotated[float, Ge(0)] = 1.0
    w_dense: Annotated[float, Ge(0)] = 1.0
    graph_weight: Annotated[float, Ge(0)] | None = None  # None: knowledge.graph_weight


@dataclass(frozen=True)
class KnowledgeSection:
    """``knowledge:`` — trust tiers, agent write-back and the content health check."""

    __pydantic_config__ = STRICT
    writeback: Literal["pending", "direct"] = "direct"  # pending: agents' notes await approval
    default_trust: Trust = "team"  # a document no rule, front matter or datasheet flag rates
    duplicate_threshold: Annotated[float, Interval(ge=0, le=1)] = 0.7  # learned-note Jaccard
    stale_days: Annotated[float, Gt(0)] = 180.0
    stale_citations: Annotated[int, Ge(1)] = 3
    golden: str | None = None  # a golden file for `clawkb health` (relative to the KB parent)
    #: fusion weight per tier (multiplies a hit's score; missing tiers weigh 1)
    trust_weights: dict[Trust, Annotated[float, Ge(0)]] = field(
        default_factory=lambda: {
            "official": 1.0,
            "team": 0.9,
            "community": 0.6,
            "learned": 0.75,
            "memory": 0.6,
        }
    )
    strict_priority: bool = False  # a higher tier's hits always above a lower tier's
    #: a lower tier's hit stays above a higher tier's only when it scores 1/band times more
    trust_band: Annotated[float, Interval(ge=0, le=1)] = 0.5
    graph_weight: Annotated[float, Ge(0)] = 0.9  # score of a linked passage vs its seed hit
    domain_weights: dict[str, DomainWeights] = field(default_factory=dict)  # `clawkb tune`
    rewrite: bool = False  # LLM query variants + HyDE (needs `llm:`)
    rewrite_budget_s: Annotated[float, Gt(0)] = 2.0  # over budget: the original query only


@dataclass(frozen=True)
class Config:
    """Knowledge-base settings: the whole of ``config.yaml``."""

    __pydantic_config__ = STRICT
    max_tokens: Annotated[int, Ge(1)] = 350
    overlap: Annotated[float, Interval(ge=0, lt=0.5)] = 0.15
    max_file_mb: Annotated[float, Gt(0)] = 20.0
    parse_timeout_s: Annotated[float, Gt(0)] = 60.0
    ignore: tuple[str, ...] = ()
    follow_symlinks: Literal["inside", "outside", "never"] = "inside"
    k1: Annotated[float, Gt(0)] = 1.2
    #: title (document title and heading path), body, code
    field_weights: tuple[float, float, float] = (2.0, 1.0, 0.6)
    #: below 1: a chunk without a title must keep a positive length norm (block bounds)
    field_b: tuple[float, float, float] = (0.3, 0.75, 0.75)
    index_batch_chunks: Annotated[int, Ge(1)] = 20000
    ingest_workers: Annotated[int, Ge(0)] = (
        0  # processes that parse/chunk/tokenize; 0 = one per core
    )
    ingest_queue_mb: Annotated[float, Gt(0)] = 64.0  # text in flight between writer and workers
    datasheets: tuple[str, ...] = ()  # folders, relative to the KB's parent folder
    board_boost: Annotated[float, Gt(0)] = 1.5
    progress_interval_s: Annotated[float, Gt(0)] = 5.0  # status line period when piped
    retrieval: RetrievalSection = field(default_factory=RetrievalSection)  # type: ignore[valid-type]
    embedding: EmbeddingSection = field(default_factory=EmbeddingSection)
    llm: LLMSettings = field(default_factory=LLMSettings)
    answer: AnswerSection = field(default_factory=AnswerSection)
    memory: MemorySection = field(default_factory=MemorySection)
    #: path glob -> trust tier, first match wins (globs as for ``datasheets``)
    sources: dict[str, Trust] = field(default_factory=dict)
    #: domain name -> path globs
    domains: dict[str, tuple[str, ...]] = field(default_factory=dict)
    knowledge: KnowledgeSection = field(default_factory=KnowledgeSection)
    #: ``local`` or ``{kind: milvus, uri, ...}``: checked by clawkb.backends.settings
    backend: str | dict[str, Any] = "local"
    #: ``clawkb serve`` settings (roots, inbox, limits): checked by clawkb.server.settings
    server: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, home: Path, env: typing.Mapping[str, str] | None = None) -> Config:
        """``<home>/config.yaml`` (optional) under ``CLAWKB_*`` variables (default os.environ).

        With no file and no setting in the environment this is just ``Config()``.
        """
        env = os.environ if env is None else env
        settings_env = any(
            k.startswith(ENV_PREFIX) and k[len(ENV_PREFIX) :] not in NOT_SETTINGS for k in env
        )
        if not settings_env and not (home / "config.yaml").exists():
            return cls()
        from clawkb.config.load import load_config

        return load_config(home, env)

    @classmethod
    def from_dict(cls, data: object, origin: str = "config") -> Config:
        """Validate ``data`` as if it were the content of the file ``origin``."""
        from clawkb.config.load import build_config

        return build_config({origin: data})

    def source(self, key: str) -> str:
        """Where the dotted ``key`` got its value: ``default``, a file or an env variable."""
        sources: dict[str, str] = getattr(self, "_sources", {})
        return sources.get(key, "default")

    def explicit(self, section: str) -> dict[str, Any]:
        """The keys of ``section`` that a file or variable set (not the defaults)."""
        value = getattr(self, section)
        return {
            f.name: getattr(value, f.name)
            for f in fields(value)
            if self.source(f"{section}.{f.name}") != "default"
        }
