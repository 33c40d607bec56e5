"""Table rows as records: a pipe table in a passage becomes ``[{header: value}]``.

Tables reach the store in pipe form (Markdown tables as written, spreadsheet
and PDF tables with their header repeated per block), so an agent can take a
"signal → pin" or "item → bin" mapping from a hit without parsing prose.
"""

from __future__ import annotations

import re

MAX_RECORDS = 100
_SEPARATOR = re.compile(r"^\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?$")


def _cells(line: str) -> list[str]:
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", body)]


def table_records(text: str, limit: int = MAX_RECORDS) -> list[dict[str, str]]:
    """Every row of every pipe table in ``text`` (header row → keys); repeated headers skipped."""
    out: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith("|") or s.count("|") < 2:
            header = None
            continue
        if _SEPARATOR.match(s):
            continue
        cells = _cells(s)
        if header is None or cells == header:
            header = cells
            continue
        keys = [h or f"col{i + 1}" for i, h in enumerate(header)]
        row = {k: v for k, v in zip(keys, cells, strict=False)}
        if any(row.values()):
            out.append(row)
            if len(out) >= limit:
                break
    return out
