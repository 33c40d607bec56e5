"""Write endpoints: memory store/forget, pin aliases, index a path, upload into the inbox.

Every write is queued for the server's one writer (see :mod:`clawkb.server.runtime`); all
but the embedding of new chunks run in its writer process
(:mod:`clawkb.server.writer_process`) as a :class:`Remote` of a function in
:mod:`clawkb.server.write_jobs`.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request, UploadFile
from pydantic import BaseModel, Field

from clawkb.errors import ConfigError, UploadTooLarge
from clawkb.server import write_jobs
from clawkb.server.api_read import state_of
from clawkb.server.security import confine
from clawkb.server.writer_process import Remote

if TYPE_CHECKING:
    from concurrent.futures import Future

    from clawkb.kb import KnowledgeBase
    from clawkb.server.app import ServerState

router = APIRouter(prefix="/api/v1", tags=["write"])
#: ZeroClaw's gateway calls this unversioned path; same handler as /api/v1/hardware/pins.
compat = APIRouter(prefix="/api", tags=["write"])


class MemoryIn(BaseModel):
    text: str = Field(min_length=1)
    namespace: str = "default"
    tags: list[str] = []
    importance: float | None = Field(default=None, ge=0, le=1)
    ttl: str | float | None = None


class ForgetIn(BaseModel):
    ids: list[str] = []
    tags: list[str] = []
    query: str | None = None
    namespace: str | None = None
    dry_run: bool = False


class PinIn(BaseModel):
    board: str = Field(min_length=1)
    alias: str = Field(min_length=1)
    pin: str = Field(min_length=1)


class IndexIn(BaseModel):
    path: str = Field(min_length=1, description="A file or folder inside a served root.")


@router.post("/memory", summary="Store a memory (same text again = same memory, refreshed)")
async def memory_store(request: Request, body: MemoryIn) -> dict[str, Any]:
    run = Remote(
        write_jobs.memory_store, body.text, namespace=body.namespace, tags=body.tags,
        importance=body.importance, ttl=body.ttl,
    )  # fmt: skip
    st = state_of(request)
    out: dict[str, Any] = await st.runtime.write(run, "memory")
    _embed_later(st)
    return out


@router.post("/memory/forget", summary="Forget memories by ids, tags and/or query")
async def memory_forget(request: Request, body: ForgetIn) -> dict[str, Any]:
    run = Remote(
        write_jobs.memory_forget, body.ids, tags=body.tags, query=body.query,
        namespace=body.namespace, dry_run=body.dry_run,
    )  # fmt: skip
    st = state_of(request)
    out: dict[str, Any] = await st.runtime.write(run, "memory")
    _embed_later(st)
    return out


async def _set_pin(request: Request, body: PinIn) -> dict[str, Any]:
    st = state_of(request)
    job = Remote(write_jobs.set_pin, body.board, body.alias, body.pin)
    edit: dict[str, Any] = await st.runtime.write(job, "pin")
    return edit


@router.post("/hardware/pins", summary="Teach a pin alias (written into the board's devices file)")
async def set_pin_v1(request: Request, body: PinIn) -> dict[str, Any]:
    return await _set_pin(request, body)


@compat.post("/hardware/pin", summary="ZeroClaw gateway: teach a pin alias")
async def set_pin_compat(request: Request, body: PinIn) -> dict[str, Any]:
    return await _set_pin(request, body)


@router.post("/index", summary="Index a file or folder inside the served roots")
async def index_path(request: Request, body: IndexIn) -> dict[str, Any]:
    st = state_of(request)
    target = confine(body.path, st.roots)
    if not target.exists():
        raise ConfigError(f"{body.path}: no such file or folder")
    report = await st.runtime.write(Remote(write_jobs.index_paths, [str(target)]), "index")
    _embed_later(st)
    st.metrics.observe_run(report, "api")
    return {"path": target.as_posix(), "report": report.to_dict()}


_SAFE_NAME = re.compile(r"[^\w.\- ()\[\]]+", re.UNICODE)


def _clean_name(raw: str | None) -> str:
    """The file name only: no folders, no leading dots, no control characters."""
    name = PurePath((raw or "").replace("\\", "/")).name
    name = _SAFE_NAME.sub("_", name).strip(" .")
    if not name or name in (".", ".."):
        raise ConfigError(f"upload: {raw!r} is not a usable file name")
    return _shorten(name, NAME_MAX_BYTES)


#: A saved name's length in UTF-8 bytes (file systems allow 255; "-N" may be added).
NAME_MAX_BYTES = 200


def _shorten(name: str, limit: int) -> str:
    """``name`` cut to ``limit`` UTF-8 bytes, its extension kept (the type check reads it)."""
    if len(name.encode()) <= limit:
        return name
    stem, ext = os.path.splitext(name)
    if len(ext.encode()) > 32:  # not an extension anyone registers: cut it like the rest
        stem, ext = name, ""
    room = limit - len(ext.encode())
    short = stem.encode()[:room].decode("utf-8", "ignore").rstrip(" .")
    return (short or "upload") + ext


@router.post("/upload", summary="Upload a file into the inbox folder and index it")
async def upload(request: Request, file: UploadFile) -> dict[str, Any]:
    st = state_of(request)
    s = st.settings
    if s.inbox is None:
        raise ConfigError("uploads are off: set server.inbox in config.yaml or pass --inbox DIR")
    name = _clean_name(file.filename)
    ext = PurePath(name).suffix.lower()
    allowed = st.upload_types()
    if ext not in allowed:
        raise ConfigError(
            f"upload: {name}: type {ext or '(none)'} is not accepted ({', '.join(sorted(allowed))})"
        )
    s.inbox.mkdir(parents=True, exist_ok=True)
    dest = _free_name(s.inbox, name)
    confine(str(dest), st.roots)
    size = 0
    fd, tmp = tempfile.mkstemp(dir=s.inbox, prefix=".upload-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := await file.read(1 << 16):
                size += len(chunk)
                if size > s.upload_max_bytes:
                    raise UploadTooLarge(f"upload: {name} is over {s.upload_max_bytes} bytes")
                out.write(chunk)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    report = await st.runtime.write(Remote(write_jobs.index_paths, [str(dest)]), "upload")
    _embed_later(st)
    st.metrics.observe_run(report, "upload")
    return {"path": dest.as_posix(), "bytes": size, "report": report.to_dict()}


def _embed_later(st: ServerState) -> None:
    """Queue the embedding of what a write added (when the KB has vectors) as a job of its
    own after it: the request returns at once, readers are not held off, and
    ``/status`` counts the chunks still pending (``dense.pending``) until it is done."""
    from clawkb.embed.run import embed_new
    from clawkb.server.writer_process import warm_dense

    runtime = st.runtime

    def embed(kb: KnowledgeBase) -> dict[str, Any] | None:
        got = embed_new(kb)
        if got and got["embedded"]:  # new vectors: the dense copy first, then the views renew
            warm_dense(kb)
            with runtime.exclusive():
                pass
        return got

    # on the writer thread, not the writer process: the model already runs in the shared
    # embedding worker, and the writer process would load a second copy of it
    fut = runtime.submit(embed, "embed", gated=False)
    fut.add_done_callback(_report_embed)


def _report_embed(fut: Future[dict[str, Any] | None]) -> None:
    exc = fut.exception()
    got = fut.result() if exc is None else None
    why = exc or (got or {}).get("error")
    if why:
        print(f"warning: new chunks not embedded yet: {why}", flush=True)


def _free_name(folder: Path, name: str) -> Path:
    dest = folder / name
    stem, ext = os.path.splitext(name)
    n = 1
    while dest.exists():
        dest = folder / f"{stem}-{n}{ext}"
        n += 1
    return dest
