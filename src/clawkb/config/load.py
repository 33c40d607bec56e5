"""Read ``config.yaml`` and ``CLAWKB_*`` variables into one validated :class:`Config`.

Every layer is checked against the same model, so a misspelt key fails the
same way wherever it comes from, naming its origin and the closest valid
name::

    /home/me/notes/.clawkb/config.yaml: unknown key 'max_token' (did you mean 'max_tokens'?)
    environment: unknown variable CLAWKB_LLM_MODLE (did you mean CLAWKB_LLM_MODEL?)

Environment variables map to keys mechanically: ``CLAWKB_<KEY>`` for a
top-level key, ``CLAWKB_<SECTION>_<KEY>`` inside a section (``CLAWKB_LLM_BASE_URL``
→ ``llm.base_url``). Lists take commas or YAML (``CLAWKB_IGNORE='*.log,tmp/'``).
The few ``CLAWKB_*`` variables that are not settings are listed in
:data:`NOT_SETTINGS`.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from clawkb.config import ENV_PREFIX as PREFIX
from clawkb.config import NOT_SETTINGS, Config
from clawkb.errors import ConfigError

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

__all__ = ["NOT_SETTINGS", "build_config", "effective", "env_layer", "env_names", "load_config"]
#: Older spellings kept working.
ENV_ALIASES = {"LLM_TIMEOUT": "llm.timeout_s"}
ENV_ORIGIN = "environment"


def load_config(home: Path, env: Mapping[str, str]) -> Config:
    path = home / "config.yaml"
    files: dict[str, Any] = {}
    if path.exists():
        files[str(path)] = read_yaml(path)
    return build_config(files, env)


def read_yaml(path: Path) -> object:
    """The YAML document of ``path`` ({} when empty): any YAML value, checked by the caller."""
    import yaml

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        problem = str(exc).replace("\n", " ")
        raise ConfigError(f"{path}: invalid YAML ({problem})") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read ({exc})") from exc


def build_config(files: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Config:
    """Validate each file, then the environment, then the merge of all (later wins)."""
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for origin, data in files.items():
        if not isinstance(data, dict):
            raise ConfigError(f"{origin}: expected a mapping of settings, got {_kind(data)}")
        data = _normalise(data, origin)
        _validate(data, origin)
        label = Path(origin).name if origin.endswith(".yaml") else origin
        _merge(merged, sources, data, label)
    if env:
        data, env_sources = env_layer(env)
        _validate(data, ENV_ORIGIN)
        _merge(merged, sources, _normalise(data, ENV_ORIGIN), "")
        sources.update(env_sources)
    config = _validate(merged, ENV_ORIGIN if env else next(iter(files), "config"))
    object.__setattr__(config, "_sources", sources)  # frozen: set once, here
    return config


def env_layer(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The settings named by ``CLAWKB_*`` variables, and which variable set each key."""
    names = env_names()
    data: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for var in sorted(env):
        if not var.startswith(PREFIX) or var[len(PREFIX) :] in NOT_SETTINGS:
            continue
        key = names.get(var)
        if key is None:
            close = difflib.get_close_matches(var, list(names), n=1, cutoff=0.75)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"{ENV_ORIGIN}: unknown variable {var}{hint}")
        section, _, leaf = key.rpartition(".")
        target = data.setdefault(section, {}) if section else data
        target[leaf] = _env_value(env[var], _annotation(key))
        sources[key] = f"env {var}"
    return data, sources


def env_names() -> dict[str, str]:
    """Every accepted ``CLAWKB_*`` variable → the dotted key it sets."""
    out: dict[str, str] = {}
    for name, annotation in _hints(Config).items():
        sub = _model_of(annotation)
        if sub is None:
            out[PREFIX + name.upper()] = name
            continue
        for leaf in _hints(sub):
            out[f"{PREFIX}{name.upper()}_{leaf.upper()}"] = f"{name}.{leaf}"
    out.update({PREFIX + alias: key for alias, key in ENV_ALIASES.items()})
    return out


def effective(config: Config) -> list[tuple[str, Any, str]]:
    """(dotted key, value, source) for every setting, in model order."""
    rows: list[tuple[str, Any, str]] = []
    for name in _hints(Config):
        value = getattr(config, name)
        section = _model_of(type(value))
        if section is not None:
            for leaf in _hints(section):
                key = f"{name}.{leaf}"
                rows.append((key, _plain(getattr(value, leaf)), config.source(key)))
        else:
            rows.append((name, _plain(value), config.source(name)))
    return rows


@functools.cache
def _adapter() -> TypeAdapter[Config]:
    return TypeAdapter(Config)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """Field name → type (``Annotated`` stripped), in declaration order."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _validate(data: dict[str, Any], origin: str) -> Config:
    try:
        return _adapter().validate_python(data)
    except ValidationError as exc:
        raise ConfigError("; ".join(_explain(err, origin) for err in exc.errors())) from None


def _explain(err: ErrorDetails, origin: str) -> str:
    loc = [str(p) for p in err["loc"]]
    dotted = ".".join(loc)
    if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        known = _fields_at(loc[:-1])
        close = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6)
        prefix = ".".join([*loc[:-1], ""]) if len(loc) > 1 else ""
        hint = f" (did you mean '{prefix}{close[0]}'?)" if close else ""
        return f"{origin}: unknown key '{dotted}'{hint}"
    if err["type"] in ("model_type", "dict_type", "dataclass_type", "model_attributes_type"):
        return f"{origin}: '{dotted}' must be a mapping of settings, got {_kind(err['input'])}"
    msg = str(err["msg"]).removeprefix("Value error, ")
    where = f"'{dotted}'" if dotted else "settings"
    if origin == ENV_ORIGIN:
        var = {key: name for name, key in env_names().items()}.get(dotted)
        where = var or where
    got = "" if isinstance(err["input"], dict) else f" (got {err['input']!r})"
    sep = " " if msg.startswith("must ") else ": "
    return f"{origin}: {where}{sep}{msg}{got}"


def _fields_at(loc: list[str]) -> list[str]:
    model: type | None = Config
    for part in loc:
        annotation = _hints(model).get(part) if model else None
        model = _model_of(annotation)
    return list(_hints(model)) if model else []


def _model_of(annotation: object) -> type | None:
    """The section class when ``annotation`` is one (a dataclass), else None."""
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return annotation
    return None


def _annotation(key: str) -> object:
    section, _, leaf = key.rpartition(".")
    model = _model_of(_hints(Config)[section]) if section else Config
    assert model is not None
    return _hints(model)[leaf]


def _env_value(raw: str, annotation: object) -> object:
    """Scalars stay strings (the model converts them); lists and mappings are parsed."""
    origin = typing.get_origin(annotation)
    if origin not in (tuple, list, dict):
        return raw
    import yaml

    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        value = raw
    if isinstance(value, str) and origin is not dict:
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _normalise(data: dict[str, Any], origin: str) -> dict[str, Any]:
    """The two shorthands: ``embedding: NAME`` and ``datasheets: DIR``."""
    out = dict(data)
    if isinstance(out.get("embedding"), str):
        out["embedding"] = {"model": out["embedding"]}
    folders = out.get("datasheets")
    if isinstance(folders, str):
        out["datasheets"] = [folders]
    elif folders is not None and (
        not isinstance(folders, list | tuple) or not all(isinstance(v, str) for v in folders)
    ):
        raise ConfigError(
            f"{origin}: 'datasheets' must be a folder or a list of folders (got {folders!r})"
        )
    return out


def _merge(into: dict[str, Any], sources: dict[str, str], data: dict[str, Any], label: str) -> None:
    for key, value in data.items():
        sub = _model_of(_hints(Config).get(key))
        if sub is not None and isinstance(value, dict):
            section = into.setdefault(key, {})
            section.update(value)
            if label:
                sources.update({f"{key}.{leaf}": label for leaf in value})
        else:
            into[key] = value
            if label:
                sources[key] = label


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def _kind(value: object) -> str:
    return {str: "a string", list: "a list", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )
