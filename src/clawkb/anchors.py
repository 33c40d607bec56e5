"""What users type as an anchor (``clawkb show``, MCP ``get_chunk``), checked before any query.

Anchors are 16 lower-case hexadecimal characters (see
:func:`clawkb.store.repo.anchor_id`); a unique prefix of one is accepted, with
an optional leading ``#`` as printed next to hits. Anything else — a pasted
sentence, 100k characters, ``%`` wildcards — is refused with one line that
shows only the start of the input.
"""

from __future__ import annotations

import re

from clawkb.errors import NotFoundError

ANCHOR_LEN = 16
_HEX = re.compile(r"[0-9a-f]{1,16}")
#: candidates listed when a prefix is ambiguous
SHOW_CANDIDATES = 5


def parse_anchor(text: str) -> str:
    """The normalised anchor (or prefix) in ``text``; NotFoundError when it cannot be one."""
    key = text.strip().removeprefix("#").lower()
    if _HEX.fullmatch(key):
        return key
    shown = repr(key[:24] + "…") if len(key) > 24 else repr(key)
    size = f" ({len(key)} characters)" if len(key) > 24 else ""
    raise NotFoundError(
        f"not an anchor: {shown}{size}; anchors are {ANCHOR_LEN} hexadecimal characters"
        " (or a unique prefix), as printed next to each hit, e.g. #08aabb22fb7f85c5"
    )


def ambiguous_message(prefix: str, candidates: list[tuple[str, str, int]]) -> str:
    """One line naming a few of the chunks a prefix matches."""
    shown = ", ".join(
        f"#{anchor} ({path}:{line})" for anchor, path, line in candidates[:SHOW_CANDIDATES]
    )
    more = ", …" if len(candidates) > SHOW_CANDIDATES else ""
    return f"anchor prefix {prefix!r} is ambiguous: it matches {shown}{more}; give more characters"
