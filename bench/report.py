"""Render benchmark results (the JSON written by run_all.py) as Markdown."""

from __future__ import annotations

from typing import Any

RATIO_METRICS: list[tuple[str, str]] = [
    ("index time", "build_s"),
    ("index CPU time", "build_cpu_s"),
    ("query p50", "query.p50_ms"),
    ("query p95", "query.p95_ms"),
    ("query mean", "query.mean_ms"),
    ("query CPU time", "query.cpu_ms"),
    ("peak RSS (each process at its own peak, added)", "rss_peak_mb"),
    ("peak RSS (process tree at once, sampled)", "rss_tree_peak_mb"),
    ("RSS over baseline", "rss_delta_mb"),
    ("index on disk", "index_bytes"),
    ("lexical index on disk", "lexical_index_bytes"),
    ("cold start (fresh process)", "cold_start.wall_s"),
]


def get(d: dict[str, Any], dotted: str) -> Any:
    if dotted == "lexical_index_bytes" and dotted not in d:
        dotted = "index_bytes"  # a peer's index is all it writes
    for part in dotted.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        if abs(x) >= 100:
            return f"{x:,.0f}"
        return f"{x:.{digits}g}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x)


def _hits(r: dict[str, Any]) -> str:
    h = r.get("self_hit_at_k") or {}
    parts = [f"{h.get(key, 0):.2f}" for key in ("all", "en", "mixed", "zh")]
    return " / ".join(parts)


def engine_table(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "| engine | index s | docs/s | p50 ms | p95 ms | mean ms | q/s | CPU ms/query "
        "| peak RSS MB | RSS over baseline MB | index MB | lexical index MB | cold start s "
        "| self-hit@10 all / en / mixed / zh |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['engine']} | failed: {r['error'][:120]} |" + " |" * 12)
            continue
        q = r["query"]
        size = r.get("index_bytes")
        lex_size = get(r, "lexical_index_bytes")
        cells = [
            r["engine"],
            fmt(r["build_s"]),
            fmt(r.get("docs_per_s")),
            fmt(q["p50_ms"]),
            fmt(q["p95_ms"]),
            fmt(q["mean_ms"]),
            fmt(q["qps"]),
            fmt(q.get("cpu_ms")),
            fmt(r["rss_peak_mb"]),
            fmt(r["rss_delta_mb"]),
            fmt(size / 2**20 if size else None),
            fmt(lex_size / 2**20 if lex_size else None),
            fmt(get(r, "cold_start.wall_s")),
            _hits(r),
        ]
        out.append("| " + " | ".join(cells) + " |")
        full = r.get("full_search")
        if full:
            cells = ["clawkb `kb.search` (full)", "", "", fmt(full["p50_ms"]), fmt(full["p95_ms"])]
            cells += [fmt(full["mean_ms"]), fmt(full["qps"]), "", "", "", "", "", ""]
            h = full.get("self_hit_at_k", {})
            cells.append(" / ".join(f"{h.get(x, 0):.2f}" for x in ("all", "en", "mixed", "zh")))
            out.append("| " + " | ".join(cells) + " |")
    return out


def _ours(by: dict[str, Any]) -> str:
    """The engine the ratios are of: clawkb (whole KB), else its index alone
    (a run of ``--engines clawkb-index,...``)."""
    return "clawkb" if "clawkb" in by or "clawkb-index" not in by else "clawkb-index"


def ratio_table(rows: list[dict[str, Any]]) -> list[str]:
    by = {r["engine"]: r for r in rows if "error" not in r}
    name = _ours(by)
    ours = by.get(name)
    peers = [p for p in by if p != name]
    if ours is None or not peers:
        return ["_Ratios need clawkb and at least one peer to have run._"]
    out = [
        "| metric (lower is better) | " + " | ".join(f"clawkb / {p}" for p in peers) + " |",
        "|---|" + "---:|" * len(peers),
    ]
    for label, key in RATIO_METRICS:
        cells = []
        for p in peers:
            a, b = get(ours, key), get(by[p], key)
            cells.append(f"{a / b:.2f}×" if a is not None and b else "–")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    cells = []
    for p in peers:  # throughput: higher is better, so shown peer-relative the other way
        a, b = get(ours, "query.qps"), get(by[p], "query.qps")
        cells.append(f"{a / b:.2f}×" if a and b else "–")
    out.append("| throughput q/s (higher is better) | " + " | ".join(cells) + " |")
    return out


def summary_table(rows: list[dict[str, Any]]) -> list[str]:
    """The one table to quote: each engine's query CPU time, q/s, build time, peak
    RSS and self-hit@10, and the new tree's ratio to each (old tree and peers, same run)."""
    by = {r["engine"]: r for r in rows if "error" not in r}
    ours = by.get(_ours(by))
    if ours is None:
        return ["_The summary needs the clawkb (or clawkb-index) run._"]
    out = [
        "| engine | CPU ms/query | q/s | index s | index CPU s | peak RSS MB | tree peak MB "
        "| self@10 | clawkb CPU/query ÷ engine | clawkb q/s ÷ engine | clawkb build ÷ engine "
        "| clawkb build CPU ÷ engine | clawkb peak RSS ÷ engine | clawkb tree peak ÷ engine |",
        "|---|" + "---:|" * 13,
    ]

    def ratio(key: str, r: dict[str, Any]) -> str:
        a, b = get(ours, key), get(r, key)
        return f"{a / b:.2f}×" if a is not None and b else "–"

    for name, r in by.items():
        hits = (r.get("self_hit_at_k") or {}).get("all")
        out.append(
            f"| {name} | {fmt(get(r, 'query.cpu_ms'))} | {fmt(get(r, 'query.qps'))} | "
            f"{fmt(get(r, 'build_s'))} | {fmt(get(r, 'build_cpu_s'))} | "
            f"{fmt(get(r, 'rss_peak_mb'))} | {fmt(get(r, 'rss_tree_peak_mb'))} | "
            f"{'–' if hits is None else f'{hits:.3f}'} | "
            + " | ".join(
                ratio(k, r)
                for k in (
                    "query.cpu_ms",
                    "query.qps",
                    "build_s",
                    "build_cpu_s",
                    "rss_peak_mb",
                    "rss_tree_peak_mb",
                )
            )
            + " |"
        )
    return out


def quality_section(quality: dict[str, Any]) -> list[str]:
    out = ["## Quality on the real sets", ""]
    if quality.get("skipped"):
        return [*out, f"_Skipped: {quality['skipped']}_", ""]
    rows = quality.get("datasets", {})
    flat = {name: _flatten(res) for name, res in rows.items()}
    keys: list[str] = []
    for metrics in flat.values():
        for key, val in metrics.items():
            if isinstance(val, int | float) and not isinstance(val, bool) and key not in keys:
                keys.append(key)
    keys = keys[:14]
    out.append("| dataset | " + " | ".join(keys) + " |")
    out.append("|---|" + "---:|" * len(keys))
    for name, metrics in flat.items():
        if "error" in metrics:
            out.append(f"| {name} | failed: {str(metrics['error'])[:120]} |")
            continue
        out.append(f"| {name} | " + " | ".join(fmt(metrics.get(k), 4) for k in keys) + " |")
    return [*out, ""]


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, dict):
        return {prefix or "value": d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        out.update(_flatten(v, key) if isinstance(v, dict) else {key: v})
    return out


def render(doc: dict[str, Any]) -> str:
    env = doc["environment"]
    lines = [
        f"# Lexical benchmark — {doc['date']}",
        "",
        f"Machine: {env['cpu_model']}, {env['cpu_count']} cores, {env['mem_gib']:.0f} GiB; "
        f"Python {env['python']}; "
        + ", ".join(f"{k} {v}" for k, v in env["versions"].items())
        + ".",
        f"Synthetic bilingual corpus (bench/synth.py, seed {doc['seed']}), "
        f"{doc['n_queries']} timed queries after {doc['warmup']} warm-up queries, k={doc['k']}, "
        "one engine per process, single-threaded BLAS/OpenMP. See bench/README.md for definitions.",
        "",
    ]
    if doc.get("old_tree"):
        lines += [f"`clawkb-old` is clawkb at {doc['old_tree']}, `clawkb` this tree.", ""]
    for size in doc["sizes"]:
        rows = doc["lexical"].get(str(size), [])
        lines += [
            f"## {size:,} documents",
            "",
            *summary_table(rows),
            "",
            *engine_table(rows),
            "",
            *ratio_table(rows),
            "",
        ]
    lines += quality_section(doc.get("quality", {"skipped": "not run"}))
    return "\n".join(lines)
