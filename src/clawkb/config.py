"""Where the knowledge base lives and the settings it keeps.

Home resolution, in order: ``--kb DIR``, ``$CLAWKB_HOME``, a ``.clawkb`` folder
in the current directory or any parent, else the user data dir. Settings come
from ``<home>/config.yaml`` (all optional) over the defaults below.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from clawkb.errors import ConfigError

LOCAL_DIR = ".clawkb"


def resolve_home(explicit: str | os.PathLike[str] | None = None, cwd: Path | None = None) -> Path:
    if explicit:
        return Path(explicit).expanduser().resolve()
    env = os.environ.get("CLAWKB_HOME")
    if env:
        return Path(env).expanduser().resolve()
    here = (cwd or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / LOCAL_DIR).is_dir():
            return folder / LOCAL_DIR
    from platformdirs import user_data_dir

    return Path(user_data_dir("clawkb", appauthor=False))


@dataclass(frozen=True)
class Config:
    """Knowledge-base settings; every field can be set in ``config.yaml``."""

    max_tokens: int = 350
    overlap: float = 0.15
    max_file_mb: float = 20.0
    parse_timeout_s: float = 60.0
    ignore: tuple[str, ...] = ()
    k1: float = 1.2
    field_weights: tuple[float, float, float] = (2.0, 1.0, 0.6)
    field_b: tuple[float, float, float] = (0.3, 0.75, 0.75)
    index_batch_chunks: int = 20000
    #: symlinks met while indexing: "inside" (follow those whose target stays in
    #: the indexed folder), "outside" (follow all), "never"
    follow_symlinks: str = "inside"
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, home: Path) -> Config:
        path = home / "config.yaml"
        if not path.exists():
            return cls()
        import yaml

        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: invalid YAML ({exc})") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of settings")
        return cls.from_dict(data, str(path))

    @classmethod
    def from_dict(cls, data: dict[str, Any], origin: str = "config") -> Config:
        known = {f.name: f for f in fields(cls) if f.name != "extra"}
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                extra[key] = value
                continue
            default = getattr(cls(), key)
            try:
                if isinstance(default, tuple):
                    kwargs[key] = tuple(type(default[0])(v) if default else v for v in value)
                else:
                    kwargs[key] = type(default)(value)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{origin}: setting {key!r} has a bad value {value!r}") from exc
        return replace(cls(), **kwargs, extra=extra)
