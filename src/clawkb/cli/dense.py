"""`clawkb embed`, `clawkb embedders`, and the retrieval options `clawkb search` takes.

Thin: parse, call :mod:`clawkb.embed.run` / the pipeline, format.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from clawkb.cli.common import echo, echo_json, handle_errors, open_kb

if TYPE_CHECKING:
    from pathlib import Path

    from clawkb.kb import KnowledgeBase
    from clawkb.retrieve.options import Option
    from clawkb.retrieve.result import SearchResult

F = TypeVar("F", bound=Callable[..., Any])


def run_embed(ctx: click.Context, *, fresh: bool, as_json: bool, model: str | None) -> None:
    from clawkb.cli.progress import JobProgress
    from clawkb.embed import vectors
    from clawkb.embed.base import get_embedder, options_for_vectors
    from clawkb.embed.run import embed_kb, reembed_kb

    with open_kb(ctx, announce=not as_json) as kb:
        name, options = kb.config.embedding.model, kb.config.embedding.options
        if not fresh:  # go on as the stored vectors were made (reindex moves to today's)
            options = options_for_vectors(name, options, vectors.stored_signature(kb.conn))
        embedder = get_embedder(model or name, options if not model or model == name else {})
        run = reembed_kb if fresh else embed_kb
        interval = kb.config.progress_interval_s
        with JobProgress("embed", "chunks", enabled=not as_json, interval=interval) as bar:
            report = run(kb, embedder=embedder, progress=bar)
    if as_json:
        echo_json(report.to_dict())
        return
    echo(
        f"{report.model}: embedded {report.embedded} · reused {report.reused} ·"
        f" {report.total} chunks with vectors ({report.seconds:.1f}s)"
    )


@click.command()
@click.option("--model", help="Embedder to use (default: `embedding.model` in config, e5-small).")
@click.option("--json", "as_json", is_flag=True, help="Print the run report as JSON.")
@click.pass_context
@handle_errors
def embed(ctx: click.Context, model: str | None, as_json: bool) -> None:
    """Compute vectors for chunks that have none (resumable; unchanged text is reused)."""
    run_embed(ctx, fresh=False, as_json=as_json, model=model)


@click.command()
@click.option("--json", "as_json", is_flag=True)
@handle_errors
def embedders(as_json: bool) -> None:
    """List the embedders this installation can use."""
    from clawkb.embed.base import available_embedders

    names = available_embedders()
    if as_json:
        echo_json(names)
    else:
        echo("\n".join(names))


class TableChoice(click.ParamType):
    """A name option of the search-options table: its choices are read when a value is
    checked or help is shown (a reranker plugin installed later is accepted)."""

    def __init__(self, option: Option) -> None:
        self.option = option
        self.name = option.name

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "[" + "|".join(self.option.allowed() or ()) + "]"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> str:
        allowed = self.option.allowed() or ()
        if not isinstance(value, str) or value not in allowed:
            # the same words as the HTTP API and the settings (one table, one message)
            self.fail(f"{self.name} must be one of {', '.join(allowed)}, got {value!r}", param, ctx)
        return value


def click_option(o: Option) -> Callable[[F], F]:
    """The click option of one search option (:class:`clawkb.retrieve.options.Option`)."""
    decls = [o.cli_flag if o.tristate else o.flag]
    if o.key != o.name:
        decls.append(o.key)
    kwargs: dict[str, Any] = {"help": o.help}
    if o.tristate:
        kwargs["default"] = None
    elif o.kind is bool:
        kwargs["is_flag"] = True
    else:
        kwargs["type"] = TableChoice(o) if o.choices is not None else o.kind
        kwargs["multiple"] = o.multiple
    if o.metavar:
        kwargs["metavar"] = o.metavar
    return click.option(*decls, **kwargs)


def retrieval_options(func: F) -> F:
    """Add every search option of the one table (:mod:`clawkb.retrieve.options`: mode,
    fusion, rerank, filters, and the query stages' own, e.g. trust and domains) to a
    command; :func:`clawkb.retrieve.options.search_kwargs` turns them into ``kb.search``
    keywords."""
    from clawkb.retrieve.options import all_options

    for o in reversed(all_options()):
        func = click_option(o)(func)
    return func


def print_pipeline_explain(exp: dict[str, Any]) -> None:
    """Per-channel rank, raw and normalised score and contribution of one hit."""
    for name, ch in (exp.get("channels") or {}).items():
        parts = [f"{k}={v}" for k, v in ch.items() if v is not None]
        echo(f"      {name:<8} " + " ".join(parts))
    if "rerank" in exp:
        echo(f"      rerank   {exp['rerank']}")
    if "merged" in exp:
        echo(f"      merged   {' + '.join(exp['merged'])}")


def print_stages(res: SearchResult) -> None:
    if res.stages:
        echo(
            f"mode {res.mode} · confidence {res.confidence:.2f} · "
            + " → ".join(
                f"{s['stage']} {s['ms']:.1f}ms"
                + ("" if s["status"] in ("ok", "hit") else f" [{s['status']}: {s.get('note', '')}]")
                for s in res.stages
            )
        )
    for rw in res.rewrites:
        echo(f"rewrite: {rw['from']} → {rw['to']} (weight {rw['weight']})")


def dense_status_line(d: dict[str, Any]) -> str:
    """`clawkb status`: model, coverage, search kind and measured ANN recall."""
    line = f"dense vectors   {d['model']} · {d['vectors']}/{d['chunks']} chunks · {d['search']}"
    ann = d.get("ann")
    if ann:
        line += f" (HNSW M={ann['M']} ef={ann['ef']}, recall@10 vs exact {ann['recall@10']:.3f})"
    if d.get("pending"):
        line += f" · {d['pending']} chunks pending (lexical only until `clawkb embed`)"
    return line


def embed_written(kb: KnowledgeBase, *, quiet: bool, as_json: bool) -> dict[str, Any] | None:
    """After ``index`` / ``learn`` / ``memory store``: embed the new chunks when the KB
    has vectors (:func:`clawkb.embed.run.embed_new`), with progress on stderr; say on
    stderr when some stay pending and why. The result goes into ``--json`` output."""
    from clawkb.cli.progress import JobProgress
    from clawkb.embed.run import embed_new

    interval = kb.config.progress_interval_s
    with JobProgress("embed", "chunks", enabled=not (quiet or as_json), interval=interval,
                     min_total=50) as bar:  # fmt: skip
        got = embed_new(kb, progress=bar)
    if got is None or as_json:
        return got
    if got["error"]:
        echo(
            f"warning: {got['pending']} new chunks not embedded yet ({got['error']});"
            " they rank by the lexical channel until `clawkb embed` runs",
            err=True,
        )
    elif got["embedded"] and not quiet:
        echo(f"embedded {got['embedded']} new chunks", err=True)
    return got


def run_compare(
    dataset_dir: str | Path,
    modes: str,
    embedder: str | None,
    limit_queries: int | None,
    as_json: bool,
) -> None:
    """`clawkb eval --modes ...`: one throw-away KB, every mode on the same queries."""
    from clawkb.embed.base import get_embedder
    from clawkb.evaluate.compare import MODES, compare_modes, format_comparison

    wanted = MODES if modes.strip() == "all" else tuple(m.strip() for m in modes.split(","))
    emb = get_embedder(embedder) if embedder else None
    result = compare_modes(dataset_dir, modes=wanted, embedder=emb, limit_queries=limit_queries)
    if as_json:
        echo_json(result.to_dict())
    else:
        echo(format_comparison(result))
