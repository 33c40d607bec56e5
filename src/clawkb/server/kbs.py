"""Several knowledge bases behind one ``clawkb serve``.

The KB the server was started for (``clawkb --kb DIR serve``) is the default;
more come from ``clawkb serve --add-kb NAME=DIR`` (repeatable) or from
``server.kbs`` in the default KB's ``config.yaml``::

    server:
      kbs:
        hw: ~/hw/.clawkb                            # a KB folder
        ops: {home: ~/ops/.clawkb, token: s3cret-ops-token}   # with its own token

Each KB has its own roots and inbox (its own ``config.yaml`` ``server:``
section, or its past index runs), its own reader views and writer thread.
API paths take a KB name: ``/api/v1/kb/NAME/search`` is ``/api/v1/search`` on
KB ``NAME``; the old paths keep serving the default KB. Tokens: the server's
``--token`` opens every KB; a KB's own ``token`` opens that KB only.
"""

from __future__ import annotations

import hmac
import os
import re
from dataclasses import dataclass
from pathlib import Path

from clawkb.errors import ConfigError

PREFIX = "/api/v1/kb/"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")


@dataclass(frozen=True)
class KBSpec:
    name: str
    home: Path
    token: str | None = None


def check_name(name: str, where: str) -> str:
    if not _NAME.match(name):
        raise ConfigError(
            f"{where}: KB name {name!r} must be letters, digits, '_', '.' or '-' (at most 64)"
        )
    return name


def default_name(home: Path) -> str:
    """``/srv/team-kb/.clawkb`` → ``team-kb``; ``/srv/kb`` → ``kb``."""
    base = home.parent.name if home.name.startswith(".") else home.name
    name = re.sub(r"[^A-Za-z0-9_.\-]+", "-", base).strip("-.") or "default"
    return name[:64]


def parse_specs(flags: list[str], raw: object, *, base: Path) -> list[KBSpec]:
    """``--add-kb NAME=DIR`` flags, then ``server.kbs`` (flags win on a name)."""
    specs: dict[str, KBSpec] = {}
    for flag in flags:
        name, sep, folder = flag.partition("=")
        if not sep or not folder:
            raise ConfigError(f"--add-kb {flag!r}: expected NAME=KB_DIR")
        check_name(name, "--add-kb")
        specs[name] = KBSpec(name, _folder(folder, base))
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("config.yaml: server.kbs must be a mapping of NAME: KB_DIR")
    for name, value in raw.items():
        check_name(str(name), "config.yaml: server.kbs")
        if name in specs:
            continue
        if isinstance(value, str):
            specs[name] = KBSpec(name, _folder(value, base))
        elif isinstance(value, dict) and isinstance(value.get("home"), str):
            unknown = set(value) - {"home", "token"}
            if unknown:
                raise ConfigError(
                    f"config.yaml: unknown setting server.kbs.{name}.{sorted(unknown)[0]}"
                    " (known: home, token)"
                )
            token = value.get("token")
            if token is not None and (not isinstance(token, str) or len(token) < 8):
                raise ConfigError(
                    f"config.yaml: server.kbs.{name}.token must be at least 8 characters"
                )
            specs[name] = KBSpec(name, _folder(value["home"], base), token)
        else:
            raise ConfigError(
                f"config.yaml: server.kbs.{name} must be a KB folder or {{home: DIR, token: T}}"
            )
    for spec in specs.values():
        if not spec.home.is_dir():
            raise ConfigError(f"KB {spec.name}: {spec.home} is not a knowledge-base folder")
    return list(specs.values())


def _folder(value: str, base: Path) -> Path:
    path = Path(os.path.expanduser(value))
    return (path if path.is_absolute() else base / path).resolve()


def split_path(path: str) -> tuple[str | None, str]:
    """``/api/v1/kb/hw/search`` → (``hw``, ``/api/v1/search``); other paths → (None, path)."""
    if not path.startswith(PREFIX):
        return None, path
    name, _, rest = path[len(PREFIX) :].partition("/")
    return name, "/api/v1/" + rest


def token_ok(given: str, tokens: list[bytes]) -> bool:
    """Constant-time: does ``given`` equal one of ``tokens``?"""
    raw = given.encode()
    return any(hmac.compare_digest(raw, t) for t in tokens)
