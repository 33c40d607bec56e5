"""The ``backend:`` setting, read in one place (:func:`backend_settings`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from clawkb.errors import ConfigError

#: A KB folder holding only this file is a remote-only KB.
REMOTE_FILE = "remote.yaml"
INDEX_TYPES = ("HNSW", "IVF_FLAT")
#: client: each channel's top-N from Milvus, fused by the local pipeline; server: hybrid_search.
FUSE_SIDES = ("client", "server")


@dataclass(frozen=True)
class MilvusSettings:
    """Where the Milvus collection is and how it is built."""

    uri: str
    token: str = ""
    collection: str = "clawkb"
    db: str = ""
    index: str = "HNSW"  # dense index: HNSW | IVF_FLAT (cosine)
    dense: bool = True  # send vectors from the KB's embedder with the rows
    batch: int = 2000  # rows per upsert / changes per sync step (bench: 2000 beat 500 by 1.4x)
    auto_sync: bool = True  # sync after every index run (else only `clawkb sync`)
    throttle_ms: float = 0.0  # pause between sync batches (spare a busy cluster)
    hnsw_m: int = 16
    hnsw_ef: int = 128
    ivf_nlist: int = 1024
    fuse: str = "client"  # hybrid fusion: client (the local pipeline's stages) | server

    @property
    def is_lite(self) -> bool:
        return not self.uri.startswith(("http://", "https://", "tcp://", "grpc://", "unix:"))

    @property
    def key(self) -> str:
        """Names this target in the store's meta keys (the sync cursor)."""
        return f"{self.uri}|{self.db}|{self.collection}"

    def describe(self) -> dict[str, Any]:
        return {"kind": "milvus", "uri": self.uri, "db": self.db, "collection": self.collection}


def parse_uri(uri: str) -> tuple[str, str]:
    """``milvus://host:port/collection`` → (``http://host:port``, collection or "")."""
    if not uri.startswith("milvus://"):
        return uri, ""
    rest = uri[len("milvus://") :]
    host, _, coll = rest.partition("/")
    if not host:
        raise ConfigError(f"bad Milvus address {uri!r}: expected milvus://HOST:PORT[/COLLECTION]")
    return f"http://{host}", coll


def milvus_settings(data: Mapping[str, Any], home: Path | None, origin: str) -> MilvusSettings:
    """Validate one ``backend:`` mapping; a relative Lite path is under the KB folder."""
    known = {f.name for f in fields(MilvusSettings)}
    bad = sorted(set(data) - known - {"kind"})
    if bad:
        raise ConfigError(f"{origin}: unknown backend setting {bad[0]!r} (known: {sorted(known)})")
    if not data.get("uri"):
        raise ConfigError(
            f"{origin}: backend kind milvus needs a `uri` (http://host:19530 or a file)"
        )
    values = {k: v for k, v in data.items() if k in known}
    uri, coll = parse_uri(str(values["uri"]))
    if coll and "collection" not in values:
        values["collection"] = coll
    values["uri"] = uri
    try:
        s = MilvusSettings(**values)
        s = MilvusSettings(**{**s.__dict__, "batch": int(s.batch), "index": str(s.index).upper()})
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{origin}: bad backend setting ({exc})") from exc
    if s.index not in INDEX_TYPES:
        raise ConfigError(f"{origin}: backend index must be one of {INDEX_TYPES}, got {s.index!r}")
    if s.fuse not in FUSE_SIDES:
        raise ConfigError(f"{origin}: backend fuse must be one of {FUSE_SIDES}, got {s.fuse!r}")
    if s.batch < 1:
        raise ConfigError(f"{origin}: backend batch must be >= 1")
    if s.is_lite and home is not None and not Path(s.uri).expanduser().is_absolute():
        s = MilvusSettings(**{**s.__dict__, "uri": str(home / s.uri)})
    elif s.is_lite:
        s = MilvusSettings(**{**s.__dict__, "uri": str(Path(s.uri).expanduser())})
    return s


def backend_settings(
    raw: str | Mapping[str, Any] | None, home: Path | None = None
) -> MilvusSettings | None:
    """The configured backend (``Config.backend``): None for ``local`` (the default),
    else Milvus settings. The one place that interprets the ``backend`` key."""
    origin = str(home / "config.yaml") if home is not None else "config"
    if raw is None or raw == "local":
        return None
    if isinstance(raw, str):
        raise ConfigError(f"{origin}: backend must be `local` or a mapping with kind: milvus")
    if not isinstance(raw, Mapping) or raw.get("kind", "milvus") not in ("milvus", "local"):
        raise ConfigError(f"{origin}: backend kind must be local or milvus, got {raw!r}")
    if raw.get("kind") == "local":
        return None
    return milvus_settings(raw, home, origin)
