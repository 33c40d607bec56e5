"""``clawkb eval`` (score a BEIR dataset) and ``clawkb check`` (golden queries).

Thin: parse options, call :mod:`clawkb.evaluate`, format the report.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from clawkb.cli.common import echo, echo_json, handle_errors, open_kb
from clawkb.evaluate.runner import EvalReport, evaluate_dataset
from clawkb.retrieve.golden import GoldenReport, check_golden

if TYPE_CHECKING:
    from clawkb.evaluate.self_check import SelfReport

#: The headline numbers, in the order BEIR tables print them.
_HEADLINE = ("ndcg@10", "mrr@10", "recall@10", "recall@100")


@click.command("eval")
@click.argument("dataset_dir", type=click.Path(file_okay=False, path_type=Path), required=False)
@click.option(
    "--self",
    "own",
    is_flag=True,
    help="Score your own KB on queries made from it (section titles, identifiers, both languages).",
)
@click.option("--per-kind", default=50, show_default=True, help="--self: queries per kind.")
@click.option("--limit-queries", type=click.IntRange(min=1), help="Score only the first N queries.")
@click.option("--json", "as_json", is_flag=True, help="Print the full report as JSON.")
@click.option(
    "--modes",
    default="lexical",
    show_default=True,
    help="Comma-separated retrieval modes to compare side by side (lexical,dense,hybrid or all).",
)
@click.option("--embedder", help="Embedder for dense/hybrid (default e5-small).")
@click.option(
    "--backend",
    type=click.Choice(["local", "milvus"]),
    default="local",
    show_default=True,
    help="Search the throw-away KB locally or on Milvus (a throw-away Milvus Lite file).",
)
@click.pass_context
@handle_errors
def eval_cmd(
    ctx: click.Context,
    dataset_dir: Path | None,
    limit_queries: int | None,
    as_json: bool,
    modes: str = "lexical",
    embedder: str | None = None,
    backend: str = "local",
    own: bool = False,
    per_kind: int = 50,
) -> None:
    """Score retrieval on a BEIR-layout DATASET_DIR in a throw-away knowledge base,
    or (``--self``) your own knowledge base on golden queries made from it.

    DATASET_DIR holds corpus.jsonl, queries.jsonl and qrels.tsv; your own
    knowledge base is not touched. ``--self`` reports hit@3 per kind of query
    (section title, rare identifier, the other language of a page) for the
    lexical, dense and default modes, so you see where your KB is weak.
    """
    if own:
        run_self_eval(ctx, as_json, per_kind)
        return
    if dataset_dir is None:
        raise click.UsageError("give a DATASET_DIR, or --self to score your own knowledge base")
    if backend == "milvus":
        from clawkb.cli.backend import run_milvus_eval

        run_milvus_eval(dataset_dir, modes, embedder, limit_queries, as_json)
        return
    if modes != "lexical":
        from clawkb.cli.dense import run_compare

        run_compare(dataset_dir, modes, embedder, limit_queries, as_json)
        return
    report = evaluate_dataset(dataset_dir, limit_queries=limit_queries)
    if as_json:
        echo_json(report.to_dict())
    else:
        echo(format_eval(report))


def run_self_eval(ctx: click.Context, as_json: bool, per_kind: int) -> None:
    from clawkb.evaluate.self_check import self_eval

    with open_kb(ctx) as kb:
        report = self_eval(kb, per_kind=per_kind)
    if as_json:
        echo_json(report.to_dict())
        return
    if not report.table:
        echo("no golden queries could be made: the KB has no section titles or identifiers")
        return
    echo(format_self(report))


def format_self(report: SelfReport) -> str:
    """One row per kind of query, one column per mode, then a few misses per kind."""
    head = f"{'kind (hit@' + str(report.k) + ')':<18} {'queries':>7}" + "".join(
        f" {m:>8}" for m in report.modes
    )
    lines = [head]
    for kind, row in report.table.items():
        cells = "".join(f" {row[m]:>8.3f}" for m in report.modes)
        lines.append(f"{kind:<18} {report.counts[kind]:>7}{cells}")
    for kind, qs in report.misses.items():
        lines.append(f"missed by the default mode ({kind}): " + "; ".join(qs))
    return "\n".join(lines)


def format_eval(report: EvalReport) -> str:
    """The human summary: dataset size, index time, headline metrics, latency."""
    lines = [
        f"dataset     {report.dataset}",
        f"docs        {report.doc_count}  chunks {report.chunk_count}  "
        f"queries {len(report.queries)}",
        f"index time  {report.index_seconds:.2f} s",
    ]
    for name in _HEADLINE:
        if name in report.metrics:
            lines.append(f"{name:<11} {report.metrics[name]:.4f}")
    lines.append(f"query p50   {report.latency_p50_ms:.1f} ms  p95 {report.latency_p95_ms:.1f} ms")
    return "\n".join(lines)


@click.command("check")
@click.argument("golden", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--k", "k", type=click.IntRange(min=1), help="Override the file's k.")
@click.option(
    "--threshold", type=click.FloatRange(0, 1), help="Override the file's pass threshold."
)
@click.option("--json", "as_json", is_flag=True, help="Print the full report as JSON.")
@click.pass_context
@handle_errors
def check_cmd(
    ctx: click.Context, golden: Path, k: int | None, threshold: float | None, as_json: bool
) -> None:
    """Run the golden queries in GOLDEN (YAML) against the knowledge base.

    Exits with code 1 when hit@k falls below the threshold, so CI can gate on it.
    """
    with open_kb(ctx) as kb:
        report = check_golden(kb, golden, k=k, threshold=threshold)
    if as_json:
        echo_json(report.to_dict())
    else:
        echo(format_check(report))
    if not report.passed:
        sys.exit(1)


def format_check(report: GoldenReport) -> str:
    """Each failing query with what came back instead, then one summary line."""
    lines: list[str] = []
    for result in report.failures:
        q = result.query
        want = q.expect_path + (f" [{q.expect_heading}]" if q.expect_heading else "")
        found = f"found at rank {result.rank}" if result.rank else "not found"
        lines.append(f"FAIL {q.query!r}: expected {want}, {found}")
        lines.extend(f"     {pos}. {path}" for pos, path in enumerate(result.top_paths, 1))
    verdict = "PASS" if report.passed else "FAIL"
    lines.append(
        f"hit@{report.k} = {report.hit_at_k:.2f} ({report.hits}/{len(report.results)}) "
        f"threshold {report.threshold:.2f}: {verdict}"
    )
    return "\n".join(lines)
