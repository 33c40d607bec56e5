"""What every bench script shares: where the data, the KB caches and the results live,
how a run records its machine, and how it writes its figures.

* Datasets (BEIR layout): in order, the script's ``--datasets DIR`` flag,
  ``$CLAWKB_DATASETS``, else ``../shared/datasets`` next to the repository root (the
  layout of the team's checkout). Nothing here names one machine's absolute path.
* KB caches (:func:`kb_caches`): the embedded knowledge bases the relevance stage and
  the calibration tools score, built once (``dense_build.py`` for the shared sets,
  ``engdocs.py`` for esp-idf-docs) with a ``DONE`` marker when complete, and scored on a
  :func:`private_copy`.
* :func:`environment`: CPU, cores, memory, Python and package versions, thread settings.
* :func:`write_results`: a run's JSON and its Markdown table under ``bench/results``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO.parent / "shared" / "datasets"
BENCH = REPO / "bench"
RESULTS = BENCH / "results"
CACHE = BENCH / ".cache"
#: The shared BEIR sets the relevance stage scores (each also a KB under the BEIR cache).
SHARED_SETS = ("cranfield", "agentset-msmarco", "cmrc2018-dev", "qbqtc-dev")
#: The esp-idf-docs language trees and the name of each tree's KB in the engdocs cache.
ENGDOCS_TREES = {"en": "en", "zh": "zh_CN"}
#: Thread settings every measuring child runs with (one core's worth of work each).
THREAD_ENV = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


def datasets_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    if explicit:
        return Path(explicit).expanduser().resolve()
    env = os.environ.get("CLAWKB_DATASETS")
    return Path(env).expanduser().resolve() if env else DEFAULT


def add_datasets_flag(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--datasets",
        metavar="DIR",
        default=None,
        help="folder of BEIR-layout datasets (default: $CLAWKB_DATASETS, else ../shared/datasets"
        " from the repository root)",
    )


def shown(path: str | os.PathLike[str]) -> str:
    """A path as a results file records it: relative to the repository's parent folder
    (``../shared/datasets``, ``../wt/x/src``) when it lies there, else its last two parts,
    so no results file carries one machine's absolute path."""
    p = Path(path).resolve()
    try:
        return str(Path("..") / p.relative_to(REPO.parent))
    except ValueError:
        return str(Path(*p.parts[-2:]))


def write_results(
    out_dir: Path, json_name: str, md_name: str, doc: dict[str, Any], render: Callable[..., str]
) -> str:
    """Write a run's figures as ``out_dir/json_name`` and its table as ``out_dir/md_name``;
    print the table and return it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / json_name).write_text(json.dumps(doc, indent=2) + "\n")
    md = render(doc)
    (out_dir / md_name).write_text(md + "\n", encoding="utf-8")
    print(md)
    return md


def kb_caches(
    cache: Path | None = None, engdocs: Path | None = None, beir: Path | None = None
) -> dict[str, Path]:
    """The embedded KBs that are built (a ``DONE`` marker), by name: ``esp-idf-en``,
    ``esp-idf-zh`` (``ENGDOCS/en``, ``ENGDOCS/zh``) and each shared set (``BEIR/NAME``).

    ``cache`` (default ``bench/.cache``) holds ``engdocs/`` and ``beir/`` unless
    ``engdocs`` / ``beir`` name other folders (e.g. read-only caches built elsewhere)."""
    root = Path(cache) if cache else CACHE
    engdocs = Path(engdocs) if engdocs else root / "engdocs"
    beir = Path(beir) if beir else root / "beir"
    found: dict[str, Path] = {}
    for tree in ENGDOCS_TREES:
        if (engdocs / tree / "DONE").is_file():
            found[f"esp-idf-{tree}"] = engdocs / tree
    for name in SHARED_SETS:
        if (beir / name / "DONE").is_file():
            found[name] = beir / name
    return found


def private_copy(src: Path, dst: Path, fresh: bool = False) -> Path:
    """``dst``: a copy of the cached KB ``src`` to open and score on, taken again when
    ``src`` was rebuilt since (its ``DONE`` marker is newer) or ``fresh``.

    Opening a KB can write to it (a tokenizer change re-tokenizes, a config is added, the
    dense cache is filled), and a cache may be shared with other checkouts, so a run never
    opens the cached folder itself."""
    stamp, done = dst / "COPIED", src / "DONE"
    stale = done.is_file() and stamp.is_file() and stamp.stat().st_mtime < done.stat().st_mtime
    if fresh or stale or not stamp.is_file():
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.lock", "query-vectors.*"))
        stamp.write_text(time.strftime("%Y-%m-%dT%H:%M:%S") + "\n")
    return dst


def environment(packages: tuple[str, ...] = ("clawkb", "numpy", "onnxruntime")) -> dict[str, Any]:
    """The machine and software a run measured on, for its results file."""
    cpu = platform.processor() or "unknown"
    mem_gib = 0.0
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next(
                (ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu
            )
        with open("/proc/meminfo", encoding="utf-8") as fh:
            mem_gib = int(fh.readline().split()[1]) / 2**20
    except OSError:
        pass
    versions = {}
    for pkg in packages:
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = "missing"
    try:
        load = [round(x, 1) for x in os.getloadavg()]
    except OSError:
        load = []
    return {
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "mem_gib": round(mem_gib, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "versions": versions,
        "load_average": load,
        "thread_env": {k: os.environ.get(k) for k in THREAD_ENV},
    }
