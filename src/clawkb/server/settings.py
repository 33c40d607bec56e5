"""Server settings: command-line flags over the ``server:`` section of ``config.yaml``.

::

    server:
      roots: [~/team-kb]          # folders the API may read and index (plus `serve PATH...`)
      inbox: ~/team-kb/inbox      # where uploads land (inside a root); unset = uploads off
      allowed_hosts: [kb.lan]     # extra Host header values accepted
      cors_origins: []            # CORS is off unless origins are listed
      allowed_origins: []         # other origins (scheme://host:port) whose pages may write
      max_body_bytes: 1048576     # any request body
      upload_max_bytes: 20971520  # one uploaded file
      upload_types: [.md, .txt]   # default: every extension a parser claims
      ask_per_minute: 30          # per client address
      watch_debounce_ms: 300
      header_timeout_s: 10        # a request's headers must arrive within this
      body_timeout_s: 30          # its body within this, plus 1 s per body_min_rate bytes
      body_min_rate: 1024         # bytes per second
      kbs: {hw: ~/hw/.clawkb}      # more KBs on the same server (see clawkb.server.kbs)
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, Unpack

from clawkb.errors import ConfigError
from clawkb.server.kbs import KBSpec, default_name, parse_specs

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")

_KNOWN = {
    "roots",
    "inbox",
    "allowed_hosts",
    "cors_origins",
    "allowed_origins",
    "max_body_bytes",
    "upload_max_bytes",
    "upload_types",
    "ask_per_minute",
    "watch_debounce_ms",
    "header_timeout_s",
    "body_timeout_s",
    "body_min_rate",
    "kbs",
}


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class ServerSettings:
    home: Path
    host: str = "127.0.0.1"
    port: int = 3000
    token: str | None = None
    roots: list[Path] = field(default_factory=list)
    inbox: Path | None = None
    watch: bool = False
    allowed_hosts: list[str] = field(default_factory=list)
    cors_origins: list[str] = field(default_factory=list)
    allowed_origins: list[str] = field(default_factory=list)
    max_body_bytes: int = 1 << 20
    upload_max_bytes: int = 20 << 20
    upload_types: list[str] = field(default_factory=list)
    ask_per_minute: int = 30
    watch_debounce_ms: int = 300
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    body_min_rate: int = 1024
    mcp: bool = True
    name: str = ""  # the default KB's name in /api/v1/kb/NAME/... (from its folder)
    kbs: list[KBSpec] = field(default_factory=list)  # the other KBs served
    workers: int = 1  # server processes on one socket (``serve --workers``)
    worker: int | None = None  # this process's index among them (None: a lone server)
    #: the workers' one writer process (its socket and key), started by their parent
    shared_writer: tuple[str, bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def check(self) -> None:
        """Refuse a non-loopback bind without a token (anyone on the network could write)."""
        if not is_loopback(self.host) and not self.token:
            raise ConfigError(
                f"binding {self.host} exposes the knowledge base to the network:"
                " give a token with --token or CLAWKB_TOKEN"
            )
        if not 1 <= self.workers <= 64:
            raise ConfigError(f"--workers must be between 1 and 64, not {self.workers}")
        if self.token is not None and len(self.token) < 8:
            raise ConfigError("the token must be at least 8 characters long")
        if self.inbox is not None and not any(_inside(self.inbox, r) for r in self.roots):
            raise ConfigError(f"server.inbox {self.inbox} must be inside one of the served roots")


def normal_origin(origin: str) -> str:
    """``https://KB.lan/`` → ``https://kb.lan``: how browsers send an Origin header."""
    return origin.strip().rstrip("/").lower()


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _paths(value: object, key: str) -> list[Path]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"config.yaml: server.{key} must be a path or a list of paths")
    return [Path(os.path.expanduser(v)).resolve() for v in value]


class Flags(TypedDict, total=False):
    """Command-line flags of ``clawkb serve`` that win over ``config.yaml`` (None: not given)."""

    host: str | None
    port: int | None
    token: str | None
    watch: bool | None
    mcp: bool | None
    workers: int | None


def load_settings(
    home: Path,
    raw: dict[str, Any],
    *,
    paths: list[str],
    inbox: str | None = None,
    add_kbs: list[str] | None = None,
    **flags: Unpack[Flags],
) -> ServerSettings:
    """Flags win over config (``raw`` is its ``server:`` section); roots are the union
    of PATH arguments and ``server.roots``."""
    if not isinstance(raw, dict):
        raise ConfigError("config.yaml: `server` must be a mapping")
    unknown = set(raw) - _KNOWN
    if unknown:
        raise ConfigError(
            f"config.yaml: unknown setting server.{sorted(unknown)[0]}"
            f" (known: {', '.join(sorted(_KNOWN))})"
        )
    roots = [Path(os.path.abspath(os.path.expanduser(p))).resolve() for p in paths]
    roots += [r for r in _paths(raw.get("roots"), "roots") if r not in roots]
    inbox_path = _paths(inbox or raw.get("inbox"), "inbox")
    s = ServerSettings(home=home, roots=roots, inbox=inbox_path[0] if inbox_path else None)
    s.name = default_name(home)
    s.kbs = parse_specs(add_kbs or [], raw.get("kbs"), base=home.parent)
    for spec in s.kbs:
        if spec.name == s.name or spec.home == home:
            raise ConfigError(f"KB {spec.name}: the default KB is already served as {s.name!r}")
    for key in ("allowed_hosts", "cors_origins", "allowed_origins", "upload_types"):
        if key in raw:
            setattr(s, key, [str(v) for v in raw[key] or []])
    ints = (
        "max_body_bytes",
        "upload_max_bytes",
        "ask_per_minute",
        "watch_debounce_ms",
        "body_min_rate",
    )
    for key in ints:
        if key in raw:
            try:
                setattr(s, key, int(raw[key]))
            except (TypeError, ValueError):
                raise ConfigError(f"config.yaml: server.{key} must be a whole number") from None
    for key in ("header_timeout_s", "body_timeout_s"):
        if key in raw:
            value = raw[key]
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not 0 < value < 86400
            ):
                raise ConfigError(
                    f"config.yaml: server.{key} must be a number of seconds between 0 and 86400"
                )
            setattr(s, key, float(value))
    for key, value in flags.items():
        if value is not None:
            setattr(s, key, value)
    s.upload_types = [t if t.startswith(".") else "." + t for t in s.upload_types]
    return s
