"""The one table of search options: CLI flags, HTTP query parameters, MCP tool
arguments and the docs table (docs/search-options.md) are all generated from
:func:`all_options` — :data:`OPTIONS` plus the options each query stage declares
(``clawkb.query_stages`` plugins: the knowledge stage's trust, domain, route, ...)
— so the front ends cannot drift apart.

Choices that name a plugin (``rerank``) come from the plugin registry when they
are read, so a reranker plugin is accepted by the HTTP API and MCP exactly as
by the CLI. Every option defaults to "not given" (the KB's ``retrieval:``
setting applies); the docs table shows that setting's default.

``python -m clawkb.retrieve.options`` prints the docs table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from clawkb.errors import ConfigError
from clawkb.retrieve.settings import FUSIONS, MODES, RetrievalSettings

NORMS = ("minmax", "zscore")

#: A search option's value as a front end parsed it: its ``kind``, a list or tuple of
#: strings for a ``multiple`` option, None when not given (checked by
#: :func:`search_kwargs` and the settings).
OptionValue = str | int | float | bool | Sequence[str] | None


def rerankers(builtin_only: bool = False) -> tuple[str, ...]:
    """Reranker names: the built-ins and every installed plugin."""
    from clawkb.plugins import BUILTIN_ORIGIN, list_plugins, names

    if builtin_only:
        found = list_plugins(("clawkb.rerankers",))
        return tuple(sorted({p.name for p in found if p.origin == BUILTIN_ORIGIN}))
    return tuple(names("clawkb.rerankers"))


@dataclass(frozen=True)
class Option:
    """One search option as every front end shows it.

    ``name`` is the HTTP parameter and MCP argument; the CLI flag is ``--name``
    with ``_`` as ``-``. ``kind`` is ``str``, ``int``, ``float`` or ``bool``
    (a flag); ``multiple`` makes it a repeatable list of ``kind``.
    """

    name: str
    kind: type
    help: str
    #: the keyword :func:`pipeline_kwargs` reads (default: ``name``)
    dest: str = ""
    choices: Callable[[], tuple[str, ...]] | None = None
    multiple: bool = False
    metavar: str = ""
    #: the ``retrieval:`` setting whose default applies when the option is not given
    setting: str = ""
    #: a bool that may be left unset (``--route/--no-route``; None: the KB's rule)
    tristate: bool = False

    @property
    def key(self) -> str:
        return self.dest or self.name

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def cli_flag(self) -> str:
        """As `--help` shows it (``--route/--no-route`` for a tri-state bool)."""
        if self.tristate:
            return f"{self.flag}/--no-{self.flag[2:]}"
        return self.flag

    @property
    def default(self) -> bool | tuple[()] | None:
        """What "not given" is: False for a flag, () for a list, else None."""
        if self.multiple:
            return ()
        return False if self.kind is bool and not self.tristate else None

    def allowed(self, builtin_only: bool = False) -> tuple[str, ...] | None:
        if self.choices is None:
            return None
        if self.choices is rerankers:
            return rerankers(builtin_only)
        return self.choices()


def _const(values: tuple[str, ...]) -> Callable[[], tuple[str, ...]]:
    return lambda: values


#: Every search option, in the order the front ends list them.
OPTIONS: tuple[Option, ...] = (
    Option("mode", str, "Retrieval channels (auto: hybrid once `clawkb embed` has run).",
           choices=_const(MODES), setting="mode"),
    Option("fusion", str, "How the channels fuse.", choices=_const(FUSIONS), setting="fusion"),
    Option("rrf_k", int, "RRF constant k.", setting="rrf_k"),
    Option("w_lexical", float, "Lexical weight (RRF weight / linear alpha).", setting="w_lexical"),
    Option("w_dense", float, "Dense weight (RRF weight / linear beta).", setting="w_dense"),
    Option("w_recency", float, "Linear fusion: recency weight gamma.", setting="w_recency"),
    Option("norm", str, "Linear fusion: score normalisation.", choices=_const(NORMS),
           setting="norm"),
    Option("rerank", str, "Rerank with dense (works out of the box), endpoint, onnx or an"
           " installed reranker plugin (`clawkb plugins`).", choices=rerankers, metavar="KIND",
           setting="rerank"),
    Option("early_return", float, "Lexical top-1 margin that skips dense (0 = never).",
           setting="early_return"),
    Option("min_confidence", float, 'With vectors: say "no match" below this P(answerable)'
           " (default: the fitted model's threshold; 0 never).", setting="min_confidence"),
    Option("no_merge", bool, "Do not merge adjacent chunks of a section."),
    Option("type", str, "Only this document type/extension (repeatable).", dest="doc_types",
           multiple=True),
    Option("meta", str, "Metadata filter KEY[=VALUE] (repeatable).", multiple=True,
           metavar="KEY[=VALUE]"),
    Option("since", str, "Only files changed since (YYYY-MM-DD or an age like 30d)."),
    Option("until", str, "Only files changed before (YYYY-MM-DD or an age)."),
)  # fmt: skip

#: Options passed through to the pipeline settings unchanged.
PASS_THROUGH = tuple(o.name for o in OPTIONS if o.setting)


def all_options() -> tuple[Option, ...]:
    """:data:`OPTIONS` and the options the query stages add (``clawkb.query_stages``
    plugins with an ``options`` attribute: the knowledge stage's trust and domains)."""
    from clawkb.plugins import load_group

    out = list(OPTIONS)
    taken = {o.name for o in out} | {o.key for o in out}
    for name, stage in load_group("clawkb.query_stages"):
        for o in getattr(stage, "options", ()):
            if o.name in taken or o.key in taken:
                raise ConfigError(f"query stage {name!r}: search option {o.name!r} is taken")
            taken |= {o.name, o.key}
            out.append(o)
    return tuple(out)


def choices(builtin_only: bool = False) -> dict[str, tuple[str, ...]]:
    """The allowed values of the options that take a name."""
    out = {}
    for o in all_options():
        allowed = o.allowed(builtin_only)
        if allowed is not None:
            out[o.key] = allowed
    return out


def check_choices(params: dict[str, Any]) -> None:
    """A one-line error for a named option outside its choices."""
    for o in all_options():
        value = params.get(o.key)
        if value is None or o.choices is None:
            continue
        allowed = o.allowed() or ()
        for v in value if o.multiple else (value,):
            if v not in allowed:
                raise ConfigError(f"{o.name} must be one of {', '.join(allowed)}, got {v!r}")


def pipeline_kwargs(params: dict[str, Any]) -> dict[str, Any]:
    """Turn parsed retrieval options into ``kb.search`` keywords (pops them from params)."""
    from clawkb.retrieve.filters import Filters, parse_meta, parse_time  # numpy: not at start-up

    mode = params.pop("mode", None)
    doc_types = params.pop("doc_types", ())
    meta = params.pop("meta", ())
    since, until = params.pop("since", None), params.pop("until", None)
    out: dict[str, Any] = {}
    if mode:
        out["mode"] = mode
    if doc_types or meta or since or until:
        out["filters"] = Filters(
            doc_types=tuple(doc_types),
            metadata=parse_meta(tuple(meta)),
            since=parse_time(since) if since else None,
            until=parse_time(until) if until else None,
        )
    if params.pop("no_merge", False):
        out["merge"] = False
    for key in PASS_THROUGH:
        value = params.pop(key, None)
        if value is not None:
            out[key] = value
    return out


def search_kwargs(params: dict[str, Any]) -> dict[str, Any]:
    """Every option of :func:`all_options` (by ``key``, popped from ``params``) as
    ``kb.search`` keywords: each query stage turns its own (``search_kwargs``), the
    rest go to :func:`pipeline_kwargs`."""
    from clawkb.plugins import load_group

    check_choices(params)
    out: dict[str, Any] = {}
    for _, stage in load_group("clawkb.query_stages"):
        convert = getattr(stage, "search_kwargs", None)
        if convert is not None:
            for key, value in convert(params).items():
                if key == "features":  # each stage's own entries, merged
                    out["features"] = {**out.get("features", {}), **value}
                else:
                    out[key] = value
    out.update(pipeline_kwargs(params))
    return out


# -- the docs table -------------------------------------------------------------
def _setting_default(o: Option) -> str:
    if not o.setting:
        return ""
    value = getattr(RetrievalSettings(), o.setting)
    if value is None:
        return "(model)" if o.setting == "min_confidence" else ""
    return (
        "(none)" if value == "" else str(value).lower() if isinstance(value, bool) else str(value)
    )


def markdown_table() -> str:
    """The table of docs/search-options.md (built-in choices only, so it is stable)."""
    kinds = {str: "text", int: "integer", float: "number", bool: "flag"}
    tri = "true / false"
    lines = [
        "| CLI | HTTP / MCP | type | choices | default | what it does |",
        "|---|---|---|---|---|---|",
    ]
    for o in all_options():
        kind = (tri if o.tristate else kinds[o.kind]) + (", repeatable" if o.multiple else "")
        allowed = o.allowed(builtin_only=True)
        shown = " ".join(f"`{c}`" for c in allowed) if allowed else ""
        if o.choices is rerankers:
            shown += " or a plugin"
        default = _setting_default(o)
        lines.append(
            f"| `{o.cli_flag}` | `{o.name}` | {kind} | {shown} | {f'`{default}`' if default else ''}"
            f" | {o.help} |"
        )
    return "\n".join(lines) + "\n"


DOC_HEAD = """# Search options

The options every front end accepts for a search — `clawkb search` flags, `GET /api/v1/search`
query parameters and the MCP `search` tool's arguments — come from one table in
`src/clawkb/retrieve/options.py`. This page is generated from it
(`python -m clawkb.retrieve.options > docs/search-options.md`; a test checks it is current).
An option that is not given leaves the knowledge base's `retrieval:` setting (the default
column) or its own rules (trust, domains, graph) in force. Plugin rerankers are accepted
everywhere, and a query-stage plugin's options join the table (`clawkb.query_stages`, see
[plugins](plugins.md)).

"""


def markdown_doc() -> str:
    return DOC_HEAD + markdown_table()


if __name__ == "__main__":
    print(markdown_doc(), end="")
