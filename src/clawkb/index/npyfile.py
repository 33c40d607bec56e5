"""Open ``.npy`` files safely from many threads at once.

``np.load`` reads the file's header with ``ast.literal_eval``; on CPython 3.11
concurrent calls to it can fail (``SystemError: AST constructor recursion depth
mismatch``), which turned concurrent segment opens under a busy server into
500s. The index writes its arrays with ``np.save`` (a plain dict header:
``descr``, ``fortran_order``, ``shape``), so the header is read here with a
regular expression; an unusual header (a structured dtype) falls back to
``np.load`` under a lock.
"""

from __future__ import annotations

import math
import re
import struct
import threading
from pathlib import Path
from typing import Literal

import numpy as np

_MAGIC = b"\x93NUMPY"
_HEADER = re.compile(
    r"\{\s*'descr':\s*'(?P<descr>[^']+)',\s*'fortran_order':\s*(?P<fortran>True|False),"
    r"\s*'shape':\s*\((?P<shape>[\d,\s]*)\),?\s*\}\s*"
)
_fallback = threading.Lock()


def load(path: Path, *, mmap: bool = False) -> np.ndarray:
    """The array in ``path`` (memory-mapped read-only when ``mmap``).

    Raises ``ValueError`` naming the file when it is not a whole ``.npy`` file.
    """
    with open(path, "rb") as fh:
        head = fh.read(10)
        if len(head) < 10 or head[:6] != _MAGIC:
            raise ValueError(f"{path}: not a .npy file")
        major = head[6]
        if major == 1:
            (size,) = struct.unpack("<H", head[8:10])
            offset = 10
        elif major in (2, 3):
            fh.seek(8)
            (size,) = struct.unpack("<I", fh.read(4))
            offset = 12
        else:
            raise ValueError(f"{path}: unknown .npy version {major}")
        raw = fh.read(size)
        match = _HEADER.fullmatch(raw.decode("latin-1"))
        if match is None or len(raw) != size:
            with _fallback:
                return _np_load(path, mmap)
        dtype = np.dtype(match["descr"])
        shape = tuple(int(part) for part in match["shape"].split(",") if part.strip())
        order: Literal["C", "F"] = "F" if match["fortran"] == "True" else "C"
        start = offset + size
        count = math.prod(shape)
        need = start + count * dtype.itemsize
        fh.seek(0, 2)
        if fh.tell() < need:
            raise ValueError(f"{path}: truncated ({fh.tell()} of {need} bytes)")
        if count == 0:
            return np.empty(shape, dtype, order=order)
        if mmap:
            return np.memmap(path, dtype, "r", start, shape, order).view(np.ndarray)
        fh.seek(start)
        flat = np.fromfile(fh, dtype, count)
        return flat.reshape(shape, order=order)


def _np_load(path: Path, mmap: bool) -> np.ndarray:
    arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    return arr.view(np.ndarray) if mmap else arr
