"""Where the shared retrieval datasets (BEIR layout) are, for every bench script.

In order: the script's ``--datasets DIR`` flag, ``$CLAWKB_DATASETS``, else
``../shared/datasets`` next to the repository root (the layout of the team's
checkout). Nothing here names one machine's absolute path.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO.parent / "shared" / "datasets"


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
