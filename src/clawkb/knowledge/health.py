"""The content health check (``clawkb doctor --content``).

Each check returns findings (dicts with ``check``, ``message`` and where to
look); :func:`check_content` runs them all. Checks:

* ``broken_link`` — a link to a note or heading that is not in the KB;
* ``orphan`` — a Markdown note nothing links to and that links to nothing;
* ``duplicate`` — near-identical passages in two different files;
* ``conflict`` — the same fact with two values in different sources: a board's
  pin alias mapped to two pins, or a register with two reset values (both anchors);
* ``stale`` — a note not touched in ``knowledge.stale_days`` days that learned
  notes cite at least ``knowledge.stale_citations`` times;
* ``golden`` — the golden file of ``knowledge.golden``, when one is configured.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawkb.knowledge import links
from clawkb.knowledge.similar import duplicate_pairs
from clawkb.store import hardware_repo, knowledge_repo
from clawkb.text.records import table_records

if TYPE_CHECKING:
    from clawkb.kb import KnowledgeBase

DUPLICATE_THRESHOLD = 0.9
_RESET = re.compile(r"reset|复位|默认值|default", re.I)
_NAME_COL = re.compile(r"^(register|reg|name|寄存器|名称)", re.I)
CHECKS = ("broken_link", "orphan", "duplicate", "conflict", "stale", "golden")


def broken_links(kb: KnowledgeBase) -> list[dict[str, Any]]:
    return [
        {
            "check": "broken_link",
            "message": f"{row.kind} link to {row.target}{'#' + row.fragment if row.fragment else ''}:"
            f" {row.broken}",
            "path": row.source,
            "line": row.line,
        }
        for row in links.all_links(kb.conn)
        if row.broken
    ]


def orphans(kb: KnowledgeBase) -> list[dict[str, Any]]:
    res = links.Resolver(kb.conn)
    linked: set[int] = set()
    for row in links.all_links(kb.conn, res):
        if row.broken:
            linked.add(res.by_path[row.source])  # it links out, even if to nothing
            continue
        a, b = res.by_path.get(row.source), res.by_path.get(row.target)
        if a is not None and b is not None and a != b:
            linked.update((a, b))
    rows = knowledge_repo.markdown_documents(kb.conn)
    return [
        {"check": "orphan", "message": "no note links here and it links nowhere", "path": p}
        for doc_id, p in rows
        if doc_id not in linked
    ]


def duplicates(kb: KnowledgeBase, threshold: float = DUPLICATE_THRESHOLD) -> list[dict[str, Any]]:
    rows = knowledge_repo.document_passages(kb.conn)
    where = {r[0]: (r[2], r[3]) for r in rows}
    out = []
    for a, b, score in duplicate_pairs([(r[0], r[1]) for r in rows], threshold):
        if where[a][0] == where[b][0]:
            continue
        out.append(
            {
                "check": "duplicate",
                "message": f"passages {score:.0%} alike",
                "path": where[a][0],
                "line": where[a][1],
                "anchors": [a, b],
                "other": f"{where[b][0]}:{where[b][1]}",
            }
        )
    return out


def conflicts(kb: KnowledgeBase) -> list[dict[str, Any]]:
    out = []
    seen: dict[tuple[str, str], dict[str, tuple[str, str, str | None]]] = {}
    for board, alias, pin, path, line, anchor in hardware_repo.alias_places(kb.conn):
        seen.setdefault((f"pin alias {board or 'generic'}:{alias}", pin), {}).setdefault(
            path, (path, str(line), anchor)
        )
    for key, where in _register_resets(kb).items():
        for value, place in where.items():
            seen.setdefault((key, value), {}).update({place[0]: place})
    facts: dict[str, dict[str, tuple[str, str, str | None]]] = {}
    for (fact, value), places in seen.items():
        facts.setdefault(fact, {})[value] = next(iter(places.values()))
    for fact, values in sorted(facts.items()):
        paths = {p[0] for p in values.values()}
        if len(values) > 1 and len(paths) > 1:
            out.append(
                {
                    "check": "conflict",
                    "message": f"{fact} has {len(values)} values: "
                    + "; ".join(f"{v} ({p[0]}:{p[1]})" for v, p in sorted(values.items())),
                    "path": sorted(paths)[0],
                    "anchors": [p[2] for p in values.values()],
                }
            )
    return out


def _register_resets(kb: KnowledgeBase) -> dict[str, dict[str, tuple[str, str, str | None]]]:
    """register -> reset value -> (path, line, anchor), from table rows in the store."""
    found: dict[str, dict[str, tuple[str, str, str | None]]] = {}
    for anchor, text, path, line in knowledge_repo.table_passages(kb.conn):
        for rec in table_records(text):
            keys = list(rec)
            name = next((k for k in keys if _NAME_COL.match(k)), None)
            reset = next((k for k in keys if _RESET.search(k)), None)
            if name and reset and rec[name] and rec[reset]:
                value = rec[reset].replace(" ", "").casefold()
                found.setdefault(f"reset value of {rec[name]}", {}).setdefault(
                    value, (path, str(line), anchor)
                )
    return found


def stale(kb: KnowledgeBase) -> list[dict[str, Any]]:
    from clawkb.knowledge.writeback import notes

    cfg = kb.config.knowledge
    cited: dict[str, int] = {}
    for note in notes(kb):
        for anchor in note.meta.get("anchors") or ():
            row = kb.repo.chunk_by_anchor(str(anchor))
            if row is not None:
                cited[row.path] = cited.get(row.path, 0) + 1
    limit = time.time() - cfg.stale_days * 86400
    out = []
    for path, count in sorted(cited.items()):
        doc = kb.repo.document(path)
        if doc is None or count < cfg.stale_citations:
            continue
        if doc.mtime_ns and doc.mtime_ns / 1e9 < limit:
            days = (time.time() - doc.mtime_ns / 1e9) / 86400
            out.append(
                {
                    "check": "stale",
                    "message": f"cited by {count} learned notes, last changed {days:.0f} days ago",
                    "path": path,
                }
            )
    return out


def golden(kb: KnowledgeBase) -> list[dict[str, Any]]:
    file = kb.config.knowledge.golden
    if not file:
        return []
    from clawkb.retrieve.golden import check_golden

    path = Path(file) if Path(file).is_absolute() else kb.home.parent / file
    report = check_golden(kb, path)
    if report.passed:
        return []
    return [
        {
            "check": "golden",
            "message": f"golden hit@{report.k} {report.hit_at_k:.2f} below {report.threshold:.2f}"
            f" ({len(report.failures)} queries fail)",
            "path": str(path),
        }
    ]


def check_content(kb: KnowledgeBase, only: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every check (or ``only`` those); ``ok`` is False when any finding is not an orphan."""
    runs = {
        "broken_link": broken_links,
        "orphan": orphans,
        "duplicate": duplicates,
        "conflict": conflicts,
        "stale": stale,
        "golden": golden,
    }
    findings: list[dict[str, Any]] = []
    for name in only or CHECKS:
        findings.extend(runs[name](kb))
    counts = {name: sum(f["check"] == name for f in findings) for name in only or CHECKS}
    serious = [f for f in findings if f["check"] != "orphan"]
    return {"ok": not serious, "counts": counts, "findings": json.loads(json.dumps(findings))}
