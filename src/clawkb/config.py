"""Where the knowledge base lives and the one settings model it keeps.

Home resolution, in order: ``--kb DIR``, ``$CLAWKB_HOME``, a ``.clawkb`` folder
in the current directory or any parent, else ``./.clawkb`` in the current
directory (created by the first write command, never a hidden user-data
folder).

Settings: :class:`Config` is the only schema. Every key of ``<home>/config.yaml``
and every ``CLAWKB_*`` environment variable is validated against it
(:mod:`clawkb.config_load`): an unknown key fails with the file and the closest
valid name, a bad value with the key and what was expected. Precedence:
defaults < ``config.yaml`` < environment. ``clawkb config`` prints the
effective values and where each came from.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    create_model,
    field_validator,
    model_validator,
)

from clawkb.errors import ConfigError
from clawkb.retrieve.settings import RetrievalSettings

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


class Section(BaseModel):
    """Base of every settings section: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


def _from_dataclass(cls: type, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Field specs (type, default) of a runtime settings dataclass: one source of defaults."""
    hints = typing.get_type_hints(cls)
    return {
        f.name: (hints[f.name], f.default)
        for f in dataclasses.fields(cls)
        if f.name not in skip and f.default is not dataclasses.MISSING
    }


class _RetrievalChecks(Section):
    @model_validator(mode="after")
    def _check(self) -> Any:
        try:  # the runtime settings own the value rules (modes, fusions, ...)
            fields = {k: getattr(self, k) for k in type(self).model_fields}
            fields.pop("rerank_options", None)
            RetrievalSettings(**fields)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self


#: ``retrieval:`` — every field of :class:`RetrievalSettings` plus the reranker's options.
RetrievalSection: Any = create_model(
    "RetrievalSection",
    __base__=_RetrievalChecks,
    rerank_options=(dict[str, Any], Field(default_factory=dict)),
    **_from_dataclass(RetrievalSettings, skip=("extra",)),
)


class EmbeddingSection(Section):
    """``embedding: e5-small`` or ``embedding: {model: NAME, options: {...}}``."""

    model: str = "e5-small"
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _bare_name(cls, data: Any) -> Any:
        return {"model": data} if isinstance(data, str) else data


class LLMSettings(Section):
    """``llm:`` — an OpenAI-compatible endpoint, an in-process GGUF, or a plugin client."""

    client: str = ""  # "" = openai when base_url is set, llama-cpp when gguf is set
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    gguf: str | None = None
    timeout_s: float = 60.0
    retries: int = Field(2, ge=0)
    backoff_s: float = Field(0.5, ge=0)
    max_retry_after_s: float = Field(30.0, ge=0)  # longest Retry-After honoured
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


class AnswerSection(Section):
    """``answer:`` — defaults for ``ask`` (unset = the built-in role / calibrated threshold)."""

    role: str | None = None
    context_tokens: int = Field(1800, ge=100)
    min_confidence: float | None = None


class MemorySection(Section):
    """``memory:`` — how recall weighs importance and age."""

    half_life_days: float = Field(30.0, gt=0)
    recency_floor: float = Field(0.25, ge=0, le=1)


class Config(Section):
    """Knowledge-base settings: the whole of ``config.yaml``."""

    max_tokens: int = Field(350, ge=1)
    overlap: float = Field(0.15, ge=0, lt=0.5)
    max_file_mb: float = Field(20.0, gt=0)
    parse_timeout_s: float = Field(60.0, gt=0)
    ignore: tuple[str, ...] = ()
    follow_symlinks: Literal["inside", "outside"] = "inside"
    k1: float = Field(1.2, gt=0)
    field_weights: tuple[float, float, float] = (2.0, 1.0, 0.6)
    field_b: tuple[float, float, float] = (0.3, 0.75, 0.75)
    index_batch_chunks: int = Field(20000, ge=1)
    datasheets: tuple[str, ...] = ()  # folders, relative to the KB's parent folder
    board_boost: float = Field(1.5, gt=0)
    progress_interval_s: float = Field(5.0, gt=0)  # status line period when output is piped
    retrieval: RetrievalSection = RetrievalSection()  # sections are frozen: sharing is safe
    embedding: EmbeddingSection = EmbeddingSection()
    llm: LLMSettings = LLMSettings()
    answer: AnswerSection = AnswerSection()
    memory: MemorySection = MemorySection()

    #: dotted key -> where its value came from ("config.yaml PATH" / "env CLAWKB_X")
    _sources: dict[str, str] = PrivateAttr(default_factory=dict)

    @field_validator("datasheets", mode="before")
    @classmethod
    def _folders(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [value]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise ValueError("must be a folder or a list of folders")
        return value

    @classmethod
    def load(cls, home: Path, env: typing.Mapping[str, str] | None = None) -> Config:
        """``<home>/config.yaml`` (optional) under ``CLAWKB_*`` variables (default os.environ)."""
        from clawkb.config_load import load_config

        return load_config(home, os.environ if env is None else env)

    @classmethod
    def from_dict(cls, data: Any, origin: str = "config") -> Config:
        """Validate ``data`` as if it were the content of the file ``origin``."""
        from clawkb.config_load import build_config

        return build_config({origin: data})

    def source(self, key: str) -> str:
        """Where the dotted ``key`` got its value: ``default``, a file or an env variable."""
        return self._sources.get(key, "default")

    @property
    def extra(self) -> dict[str, Any]:
        """The sections as plain dicts of the keys that were set (for older call sites)."""
        return {
            "retrieval": self.retrieval.model_dump(exclude_unset=True),
            "embedding": self.embedding.model_dump(),
            "llm": self.llm.model_dump(exclude_unset=True),
            "answer": self.answer.model_dump(exclude_unset=True),
            "memory": self.memory.model_dump(exclude_unset=True),
            "board_boost": self.board_boost,
            **({"datasheets": list(self.datasheets)} if self.datasheets else {}),
        }
