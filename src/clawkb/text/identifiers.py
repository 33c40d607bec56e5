"""Identifier-like tokens in text: what engineers search for verbatim.

``CONFIG_FOO``, ``gpio_set_level()``, ``0x4002_3800``, ``GPIOB_PUPDR``,
``ObserverEvent``, ``esp_netif.h.in``-style dotted names. Used where an exact
identifier is evidence on its own: the "no match" decision (a query whose
identifier the best passages hold verbatim is answered) and ``eval --self``
(identifiers found in one document become golden queries).
"""

from __future__ import annotations

import re

IDENTIFIER = re.compile(
    r"(?<![\w.])(?:"
    r"0[xX][0-9A-Fa-f][0-9A-Fa-f_]{2,}"  # hex, with digit separators
    r"|[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+"  # snake_case, CONFIG_FOO, GPIOB_PUPDR
    r"|[a-z]+(?:[A-Z][a-z0-9]+){1,}[A-Za-z0-9]*"  # camelCase
    r"|(?:[A-Z][a-z0-9]+){2,}[A-Za-z0-9]*"  # CamelCase
    r"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){2,}"  # dotted.path.name
    r")(?:\(\))?(?!\w|\.\w)"
)


def identifiers(text: str) -> list[str]:
    """The identifiers in ``text``, in order, without a trailing ``()``, each once."""
    return list(dict.fromkeys(m.group(0).removesuffix("()") for m in IDENTIFIER.finditer(text)))
