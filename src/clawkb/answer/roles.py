"""Role prompt templates: YAML files holding Jinja2 templates for the chat.

A role file has ``name``, ``description``, ``system`` and ``user`` keys; the
templates see ``question``, ``context`` (all passages already wrapped as data,
see :mod:`clawkb.text.injection`), ``passages`` (list of dicts with ``n``,
``source``, ``section``, ``text``, ``flags``, ``wrapped``) and ``role``.
Built-in roles (``engineer``, ``student``, ``agent``) ship in this package;
a user's ``<kb home>/roles/*.yaml`` adds roles or overrides a built-in one by
name. Templates render in a sandbox with strict undefined variables, so a typo
in a user's role is a clear error naming the file instead of an empty prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawkb.answer.context import Passage
from clawkb.errors import ConfigError, NotFoundError
from clawkb.text.injection import wrap_passage

if TYPE_CHECKING:
    from jinja2 import Template

__all__ = ["DEFAULT_ROLE", "Role", "list_roles", "load_role", "render_messages"]

DEFAULT_ROLE = "engineer"
BUILTIN_DIR = Path(__file__).with_name("roles")
_KEYS = {"name", "description", "system", "user"}


@dataclass(frozen=True)
class Role:
    name: str
    description: str
    system: str
    user: str
    origin: str  # "builtin" or the file path

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "description": self.description, "origin": self.origin}


def _read(path: Path, origin: str) -> Role:
    """Parse a role file; cached on (path, mtime, size) since ``ask`` loads roles every call."""
    try:
        st = path.stat()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read role file ({exc})") from exc
    return _read_cached(path, origin, st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=256)
def _read_cached(path: Path, origin: str, mtime_ns: int, size: int) -> Role:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read role file ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a role file must be a mapping with keys {sorted(_KEYS)}")
    unknown = set(data) - _KEYS
    missing = {"system", "user"} - set(data)
    if unknown or missing:
        what = [f"unknown keys {sorted(unknown)}"] if unknown else []
        what += [f"missing keys {sorted(missing)}"] if missing else []
        raise ConfigError(f"{path}: {'; '.join(what)} (a role has {sorted(_KEYS)})")
    for key in ("system", "user"):
        if not isinstance(data[key], str):
            raise ConfigError(f"{path}: {key!r} must be a template string")
    _compile(str(data["system"]), str(path))
    _compile(str(data["user"]), str(path))
    return Role(
        name=str(data.get("name") or path.stem),
        description=str(data.get("description") or ""),
        system=data["system"],
        user=data["user"],
        origin=origin,
    )


def list_roles(home: Path | None = None) -> list[Role]:
    """Built-in roles, then the KB's own (a same-named user role replaces a built-in)."""
    roles: dict[str, Role] = {}
    for path in sorted(BUILTIN_DIR.glob("*.yaml")):
        role = _read(path, "builtin")
        roles[role.name] = role
    if home is not None and (home / "roles").is_dir():
        for path in sorted((home / "roles").glob("*.yaml")):
            role = _read(path, str(path))
            roles[role.name] = role
    return list(roles.values())


def load_role(name: str, home: Path | None = None) -> Role:
    for role in list_roles(home):
        if role.name == name:
            return role
    names = ", ".join(r.name for r in list_roles(home))
    raise NotFoundError(f"no role named {name!r} (available: {names}; add <kb>/roles/{name}.yaml)")


@lru_cache(maxsize=64)
def _compile(source: str, origin: str) -> Template:
    from jinja2 import StrictUndefined, TemplateSyntaxError
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=False)
    try:
        return env.from_string(source)
    except TemplateSyntaxError as exc:
        raise ConfigError(f"{origin}: template error on line {exc.lineno}: {exc.message}") from exc


def render_messages(role: Role, question: str, passages: Sequence[Passage]) -> list[dict[str, str]]:
    """System + user chat messages for ``question`` over the numbered ``passages``."""
    from jinja2 import TemplateError

    items: list[dict[str, Any]] = []
    wrapped_all: list[str] = []
    for p in passages:
        wrapped = wrap_passage(p.n, p.source, p.section, p.text, list(p.flags))
        wrapped_all.append(wrapped)
        items.append(
            {
                "n": p.n,
                "source": p.source,
                "section": p.section,
                "text": p.text,
                "flags": list(p.flags),
                "wrapped": wrapped,
            }
        )
    variables = {
        "question": question,
        "context": "\n\n".join(wrapped_all),
        "passages": items,
        "role": role.name,
    }
    try:
        system = _compile(role.system, role.origin).render(**variables).strip()
        user = _compile(role.user, role.origin).render(**variables).strip()
    except TemplateError as exc:
        raise ConfigError(f"role {role.name!r} ({role.origin}): {exc}") from exc
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
