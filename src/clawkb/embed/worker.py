"""Embedding in a child process, for a long-running host (``clawkb serve``).

Loading a model costs about a second of CPU with the GIL held (the static
model's tokenizer; an ONNX session for e5) and a few hundred MB. In the
server's own process that second stalls every request in flight, and the
model stays in the server's memory for good. :class:`WorkerEmbedder` runs the
model in a child process instead: the child loads it and embeds one query to
warm it while the host goes on serving; :meth:`WorkerEmbedder.loading` tells
searches to stay lexical until it is ready, so no request thread ever waits
for a load. Texts go to the child and vectors come back over a pipe
(length-prefixed pickles between this process and its own child).

The child exits when its input closes (the host stopped or died).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import IO, Any

import numpy as np

from clawkb.embed.base import Embedder, get_embedder
from clawkb.errors import EndpointError

#: Longest a write (the writer's embedding of new chunks) waits for the child's model.
LOAD_WAIT_S = 300.0
_HEAD = struct.Struct("<Q")


def _send(fh: IO[bytes], obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    fh.write(_HEAD.pack(len(data)) + data)
    fh.flush()


def _recv(fh: IO[bytes]) -> tuple[object, object]:
    """One ``(kind, value)`` message, as :func:`_send` wrote it."""
    head = fh.read(_HEAD.size)
    if len(head) < _HEAD.size:
        raise EOFError("the embedding worker closed its pipe")
    (size,) = _HEAD.unpack(head)
    data = fh.read(size)
    if len(data) < size:
        raise EOFError("the embedding worker closed its pipe")
    msg = pickle.loads(data)
    if not (isinstance(msg, tuple) and len(msg) == 2):
        raise EOFError("the embedding worker sent a malformed message")
    return msg[0], msg[1]


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class WorkerEmbedder(Embedder):
    """The embedder ``name`` with ``options``, run in a child process (see the module doc).

    ``local`` is the same embedder built in this process, unloaded: it gives the
    signature (name, dimension, prefix, normalisation) without a model load."""

    def __init__(self, name: str, options: Mapping[str, Any], local: Embedder) -> None:
        self.name, self.dim = local.name, local.dim
        self.prefix, self.normalized = local.prefix, local.normalized
        self._signature = local.signature()  # with any model-specific field (e5's layout)
        self._spec = (name, dict(options))
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._error: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._start()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> None:
        self._ready.clear()
        self._error = None
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "clawkb.embed.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
        )
        threading.Thread(target=self._boot, args=(self._proc,), daemon=True).start()

    def _boot(self, proc: subprocess.Popen[bytes]) -> None:
        """Send the model's name, wait (GIL released, on a pipe) for the child's load."""
        assert proc.stdin is not None and proc.stdout is not None
        with self._lock:
            try:
                _send(proc.stdin, self._spec)
                kind, value = _recv(proc.stdout)
            except (OSError, EOFError, pickle.PickleError, ValueError) as exc:
                kind, value = "error", _one_line(exc)
            if kind == "ready" and value != self.signature():
                kind, value = "error", f"the worker's model is {value}, not {self.signature()}"
            if kind != "ready":
                self._error = f"the embedding worker could not load {self.name!r} ({value})"
            self._ready.set()

    def signature(self) -> dict[str, Any]:
        return dict(self._signature)

    def loading(self) -> bool:
        return not self._ready.is_set()

    def wait_ready(self, timeout: float = LOAD_WAIT_S) -> bool:
        """Wait for the child's model; True when it loaded."""
        return self._ready.wait(timeout) and self._error is None

    def warm(self) -> None:
        """Nothing to load here: the child loads the model (a write waits for it)."""

    def _call(self, kind: str, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        if not self._ready.wait(LOAD_WAIT_S):
            raise EndpointError(f"the embedding worker did not load {self.name!r} in time")
        with self._lock:
            proc = self._proc
            if self._error is not None or proc is None:
                raise EndpointError(self._error or "the embedding worker is stopped")
            assert proc.stdin is not None and proc.stdout is not None
            try:
                _send(proc.stdin, (kind, [str(t) for t in texts]))
                status, value = _recv(proc.stdout)
            except (OSError, EOFError, pickle.PickleError, ValueError) as exc:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=1)
                why = f"the embedding worker stopped (exit code {proc.poll()}: {_one_line(exc)})"
                _stop(proc)
                self._start()  # a new one loads meanwhile; searches stay lexical till then
                raise EndpointError(why) from None
        if status != "ok":
            raise EndpointError(f"embedding worker: {value}")
        vecs = np.asarray(value, np.float32)
        if vecs.shape != (len(texts), self.dim):
            raise EndpointError(f"embedding worker: {vecs.shape} vectors for {len(texts)} texts")
        return vecs

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._call("documents", texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._call("queries", texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self._call("queries", [text])[0]

    def close(self) -> None:
        """Stop the child (its input closes: it exits)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            _stop(proc)


def _stop(proc: subprocess.Popen[bytes], wait: float = 10.0) -> None:
    """Close the child's pipes (it exits at the end of its input); kill it if it lingers."""
    for fh in (proc.stdin, proc.stdout):
        if fh is not None:
            with contextlib.suppress(OSError):
                fh.close()
    try:
        proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def worker_embedder(name: str, options: Mapping[str, Any]) -> Embedder:
    """``name`` with ``options`` in a child process (the model loads there, in the background)."""
    return WorkerEmbedder(name, options, get_embedder(name, options))


def main() -> None:
    """The child: read the model's name, load and warm it, then answer until the pipe closes."""
    inp = sys.stdin.buffer
    out = os.fdopen(os.dup(1), "wb")  # the protocol's own descriptor; stray prints go to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        name, options = _recv(inp)
    except EOFError:
        return
    try:
        if not isinstance(name, str) or not isinstance(options, dict):
            raise ValueError("the host sent no model name")
        embedder = get_embedder(name, options)
        embedder.warm()
        embedder.embed_queries(["warm"])  # the first query's own set-up, too
    except Exception as exc:
        _send(out, ("error", _one_line(exc)))
        return
    _send(out, ("ready", embedder.signature()))
    while True:
        try:
            kind, texts = _recv(inp)
        except EOFError:
            return
        try:
            if not isinstance(texts, list):
                raise ValueError("the host sent no texts")
            if kind == "documents":
                vecs = embedder.embed_documents(texts)
            else:
                vecs = embedder.embed_queries(texts)
            _send(out, ("ok", np.ascontiguousarray(vecs, np.float32)))
        except Exception as exc:  # one line back to the host; the worker keeps serving
            _send(out, ("error", _one_line(exc)))


if __name__ == "__main__":
    main()
