"""`make bench`: the benchmark stages, each one parameterised runner over bench/'s scripts.

    .venv/bin/python bench/stages.py                         # every stage, full size
    .venv/bin/python bench/stages.py relevance --quick       # one stage, small and fast
    .venv/bin/python bench/stages.py --list                  # the stages, their steps, peers
    make bench BENCH_STAGES="formats milvus" BENCH_QUICK=1   # the same through make

A stage is a list of steps; a step is one measuring script run in its own process
(``python bench/SCRIPT.py ARGS``), so each keeps its command line and its peak RSS is its
own. The full mode runs each script as ``make bench`` always has; ``--quick`` runs it on
a small input to check that the stage works end to end. A quick run never changes the
recorded numbers: files it writes under ``bench/results`` are moved to
``bench/.cache/quick/<stage>/`` and the recorded ones put back.

Every run records, per stage it ran, in ``stages.json`` (the results folder, or the quick
folder; other stages' last records are kept): per step the command, exit status, wall
seconds and the children's CPU seconds, and the environment (:func:`shared_data.environment`).

Options shared by the stages: ``--old-ref`` (the older tree of the lexical and embed
stages), ``--cache`` (where KBs are built and kept), ``--engdocs-cache`` / ``--beir-cache``
(read-only KB caches built elsewhere, copied before scoring), ``--no-build`` (score only
what is cached), ``--datasets`` (the shared datasets folder). See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from old_tree import ISSUE24_BASE  # noqa: E402
from shared_data import (  # noqa: E402
    CACHE,
    RESULTS,
    THREAD_ENV,
    datasets_dir,
    environment,
    kb_caches,
    shown,
)

#: `make bench`'s older tree (the Makefile passes BENCH_OLD_REF, the same commit by default).
OLD_REF = ISSUE24_BASE


@dataclass
class Step:
    """One script run: ``python bench/<script> <args>`` with ``env`` added."""

    script: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    #: why the step cannot run here (missing data, cache or package): skipped, with this note
    skip: str = ""


@dataclass
class Stage:
    name: str
    measures: str
    peer: str
    steps: Callable[[argparse.Namespace], list[Step]]


def _lexical(o: argparse.Namespace) -> list[Step]:
    if o.quick:
        args = ["--sizes", "5000", "--queries", "200", "--engines", "clawkb,bm25s,tantivy"]
        return [Step("run_all.py", [*args, "--no-quality"])]
    return [Step("run_all.py", ["--old-ref", o.old_ref])]


def _embed(o: argparse.Namespace) -> list[Step]:
    if o.quick:
        quick = ["--chunks", "16", "--files", "16", "--rounds", "1", "--sets", "esp-en,cranfield"]
        profile = ["--chunks", "8", "--files", "16", "--sets", "esp-en", "--rows", "64"]
        return [
            Step("embed_speed.py", ["--old-ref", o.old_ref, *quick]),
            Step("embed_profile.py", profile),
        ]
    return [Step("embed_speed.py", ["--old-ref", o.old_ref]), Step("embed_profile.py")]


def _relevance(o: argparse.Namespace) -> list[Step]:
    cache = Path(o.cache)
    engdocs = Path(o.engdocs_cache) if o.engdocs_cache else cache / "engdocs"
    beir = Path(o.beir_cache) if o.beir_cache else cache / "beir"
    common = ["--cache", str(engdocs), "--beir-cache", str(beir)]
    common += ["--work", str(cache / "engdocs-work"), "--qvec", str(cache / "qvec-engdocs")]
    if o.no_build or o.quick:
        common.append("--no-build")
    if o.quick:
        quick = ["--sets", "cranfield", "--beir-queries", "40", "--modes", "lexical,hybrid"]
        table = Step("engdocs.py", [*common, *quick, "--tag", "quick"], dict(THREAD_ENV))
    else:
        table = Step("engdocs.py", common, dict(THREAD_ENV))
    # The KBs exist only after the table's step built them: resolved here for --list and
    # the quick mode (which builds nothing); a full run builds first, then re-reads them.
    kbs = kb_caches(cache, engdocs, beir)
    if "--no-build" in common and not kbs:
        table.skip = (
            "no embedded KB cached: run the full stage once, or give --engdocs-cache / --beir-cache"
        )
    steps = [table]
    wanted = ["cranfield", "agentset-msmarco", "qbqtc-dev", "cmrc2018-dev", "esp-idf-en"]
    wanted += ["esp-idf-zh"]
    if o.quick:
        wanted = ["cranfield", "esp-idf-en"]
    specs = [f"{n}={kbs[n]}" for n in wanted if n in kbs]
    missing = [n for n in wanted if n not in kbs]
    rates_args = [a for s in specs for a in ("--kb", s)]
    rates_args += ["--queries", "20" if o.quick else "300"]
    skip = "" if specs else f"no embedded KB cached yet ({', '.join(missing)}): run the table first"
    steps.append(Step("notfound_rates.py", rates_args, dict(THREAD_ENV), skip=skip))
    latency_kb = kbs.get("agentset-msmarco")
    latency_args = ["--kb", str(latency_kb or beir / "agentset-msmarco")]
    latency_args += ["--work", str(cache / "default-latency")]
    if o.quick:
        latency_args += ["--queries", "20", "--rounds", "1"]
    skip = "" if latency_kb else "the agentset-msmarco KB is not cached yet"
    steps.append(Step("default_latency.py", latency_args, dict(THREAD_ENV), skip=skip))
    return steps


def _service(o: argparse.Namespace) -> list[Step]:
    if o.quick:
        return [
            Step("cli_latency.py", ["--runs", "3"]),
            Step("lsp_hover.py", ["--rounds", "3"]),
            Step("hardware_context.py", ["--runs", "3"]),
            Step("soak.py", ["--seconds", "20"]),
            Step("server.py", ["--duration", "5", "--files", "200", "--clients", "10"]),
            Step("serve_cpu.py", ["src"], {"ROUNDS": "1", "N": "50", "CONC": "4"}),
        ]
    return [
        Step("cli_latency.py"),
        Step("lsp_hover.py"),
        Step("hardware_context.py"),
        Step("soak.py"),
        Step("server.py"),
        Step("serve_cpu.py", ["src"]),
    ]


def _formats(o: argparse.Namespace) -> list[Step]:
    rst = datasets_dir(o.datasets) / "esp-idf-docs" / "en"
    debian = Path("/usr/share/doc")
    trees = ["--rst", str(rst)] if rst.is_dir() else []
    if debian.is_dir() and not o.quick:
        trees += ["--debian", str(debian)]
    if o.quick:
        trees += ["--limit", "30"]
    return [
        Step("formats.py", ["--rows", "2000", "--repeats", "1"] if o.quick else []),
        Step("formats_trees.py", trees, skip="" if rst.is_dir() else f"{rst} not found"),
        Step("pdf_extract.py", ["--repeat", "1"] if o.quick else []),
    ]


def _milvus(o: argparse.Namespace) -> list[Step]:
    if o.quick:
        parity = ["--sets", "cranfield", "--limit-queries", "20", "--modes", "lexical"]
        scale = ["--docs", "2000", "--queries", "20"]
        return [Step("milvus_parity.py", parity), Step("milvus_scale.py", scale)]
    return [Step("milvus_parity.py"), Step("milvus_scale.py")]


STAGES = {
    s.name: s
    for s in (
        Stage(
            "lexical",
            "index time, CPU per query, RSS, index size, self-hit@10 on a synthetic bilingual"
            " corpus (100k, 1M), then nDCG@10 on the shared sets",
            "bm25s (numba, numpy), tantivy (same tokens / own tokenizer), the older tree",
            _lexical,
        ),
        Stage(
            "embed",
            "e5-small chunks per CPU-second on real chunk lengths (esp-idf en/zh, cranfield,"
            " cmrc2018)",
            "the older tree's embedder on the same texts, same run",
            _embed,
        ),
        Stage(
            "relevance",
            "esp-idf-docs hit@3 / MRR per query kind and mode, nDCG@10 per mode on the shared"
            " sets (dev / held-out halves); not-found false-abstain / false-answer; default-mode"
            " search CPU",
            "lexical and plain hybrid (RRF) modes, same KBs, same run",
            _relevance,
        ),
        Stage(
            "service",
            "`clawkb` CLI start-up, LSP hover, `context` latency, soak under readers + writers,"
            " HTTP overhead / concurrency / watch / web page, server CPU per request",
            "the library call in-process; targets in docs (p99, 0 errors)",
            _service,
        ),
        Stage(
            "formats",
            "spreadsheet rows/s, document-tree section titles found (esp-idf .rst, Debian"
            " docs), PDF pages/s and fidelity on generated fixtures",
            "openpyxl / csv; pdfplumber, pypdf, pypdfium2",
            _formats,
        ),
        Stage(
            "milvus",
            "ranking parity local vs Milvus Lite on the shared sets; ingest and query at scale",
            "the local backend on the same corpus",
            _milvus,
        ),
    )
}


@contextmanager
def results_kept(quick_dir: Path | None) -> Iterator[None]:
    """With ``quick_dir``: afterwards, move what changed under bench/results there and put
    the recorded files back (a quick run never overwrites the recorded numbers)."""
    if quick_dir is None:
        yield
        return
    before = {p: p.read_bytes() for p in RESULTS.rglob("*") if p.is_file()}
    try:
        yield
    finally:
        for p in sorted(RESULTS.rglob("*")):
            if not p.is_file() or before.get(p) == p.read_bytes():
                continue
            dest = quick_dir / p.relative_to(RESULTS)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dest)
            if p in before:
                p.write_bytes(before[p])
            else:
                p.unlink()
        for p, data in before.items():  # a file a step deleted
            if not p.exists():
                p.write_bytes(data)


def _recorded(args: list[str]) -> list[str]:
    """Arguments as a results file records them: no machine's absolute path."""
    out = []
    for a in args:
        if a.startswith("/"):
            a = shown(a)
        elif "=/" in a:  # NAME=DIR
            name, _, path = a.partition("=")
            a = f"{name}={shown(path)}"
        out.append(a)
    return out


def run_step(step: Step, o: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, str(HERE / step.script), *step.args]
    row: dict[str, Any] = {"script": step.script, "args": _recorded(step.args), "env": step.env}
    if step.skip:
        print(f"[bench] skip {step.script}: {step.skip}", file=sys.stderr, flush=True)
        return {**row, "skipped": step.skip}
    env = dict(os.environ, **step.env)
    if o.datasets:
        env["CLAWKB_DATASETS"] = str(datasets_dir(o.datasets))
    print(f"[bench] {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    code = subprocess.call(cmd, env=env, cwd=HERE.parent)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    row.update(exit=code, wall_s=round(time.perf_counter() - t0, 1), cpu_s=round(cpu, 1))
    return row


def run_stage(stage: Stage, o: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    quick_dir = CACHE / "quick" / stage.name if o.quick else None
    with results_kept(quick_dir):
        # steps are resolved one at a time: a later step may use a KB an earlier one built
        for i in range(len(stage.steps(o))):
            row = run_step(stage.steps(o)[i], o)
            rows.append(row)
            if row.get("exit") and not o.keep_going:
                break
    return rows


def _shown_step(step: Step) -> str:
    env = [f"{k}={v}" for k, v in step.env.items() if k not in THREAD_ENV]
    return " ".join([*env, step.script, *_recorded(step.args)])


def listing(o: argparse.Namespace) -> str:
    full = argparse.Namespace(**{**vars(o), "quick": False})
    quick = argparse.Namespace(**{**vars(o), "quick": True})
    lines = []
    for s in STAGES.values():
        if o.stages and s.name not in o.stages:
            continue
        lines += [f"{s.name}: {s.measures}", f"  peer: {s.peer}"]
        for a, b in zip(s.steps(full), s.steps(quick), strict=True):
            lines += [f"  {_shown_step(a)}", f"    quick: {_shown_step(b)}"]
            if a.skip:
                lines.append(f"    (skipped now: {a.skip})")
    return "\n".join(lines)


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stages", nargs="*", help=f"stages to run (default: all: {' '.join(STAGES)})")
    ap.add_argument("--quick", action="store_true", help="small inputs; results kept aside")
    ap.add_argument("--list", action="store_true", help="print the stages and their steps")
    ap.add_argument("--keep-going", action="store_true", help="run every step despite failures")
    ap.add_argument("--old-ref", default=os.environ.get("BENCH_OLD_REF") or OLD_REF)
    ap.add_argument("--cache", default=str(CACHE), help="KBs built and kept (bench/.cache)")
    ap.add_argument("--engdocs-cache", help="esp-idf KBs built elsewhere (read, never written)")
    ap.add_argument("--beir-cache", help="shared-set KBs built elsewhere (read, never written)")
    ap.add_argument("--no-build", action="store_true", help="score only the cached KBs")
    ap.add_argument("--datasets", help="the shared datasets folder (default ../shared/datasets)")
    o = ap.parse_args(argv)
    o.stages = [s for arg in o.stages for s in arg.replace(",", " ").split()]
    unknown = [s for s in o.stages if s not in STAGES]
    if unknown:
        ap.error(f"unknown stage {', '.join(unknown)} (stages: {', '.join(STAGES)})")
    return o


def main(argv: list[str] | None = None) -> int:
    o = parse(sys.argv[1:] if argv is None else argv)
    if o.list:
        print(listing(o))
        return 0
    report: dict[str, Any] = {"environment": environment(), "stages": {}}
    failed = []
    for name in o.stages or list(STAGES):
        rows = run_stage(STAGES[name], o)
        report["stages"][name] = rows
        if any(r.get("exit") for r in rows):
            failed.append(name)
            if not o.keep_going:
                break
    out = ((CACHE / "quick") if o.quick else RESULTS) / "stages.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    earlier = json.loads(out.read_text("utf-8")) if out.is_file() else {}
    # one record per stage: the last run of each, with the machine it ran on
    merged = {
        **earlier,
        **{
            n: {"rows": r, "environment": report["environment"]}
            for n, r in report["stages"].items()
        },
    }
    out.write_text(json.dumps(merged, indent=1) + "\n")
    for name, rows in report["stages"].items():
        for r in rows:
            state = "skipped" if "skipped" in r else f"exit {r['exit']}"
            timing = "" if "skipped" in r else f" {r['wall_s']} s wall, {r['cpu_s']} s CPU"
            print(f"[bench] {name}: {r['script']} {state}{timing}", file=sys.stderr)
    if failed:
        print(f"[bench] failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
