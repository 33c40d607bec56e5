"""Where the shared retrieval datasets (BEIR layout) are, for every bench script.

In order: the script's ``--datasets DIR`` flag, ``$CLAWKB_DATASETS``, else
``../shared/datasets`` next to the repository root (the layout of the team's
checkout). Nothing here names one machine's absolute path.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

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
