"""Text normalisation and the one tokenizer used for documents and queries."""

from clawkb.text.tokenize import TOKENIZER_VERSION, normalize, tokenize

__all__ = ["TOKENIZER_VERSION", "normalize", "tokenize"]
