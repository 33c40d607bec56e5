"""Puts ``bench/`` on ``sys.path`` for the tools that reuse its helpers.

The calibration tools fit on the same question sets and KBs the relevance stage
measures (``bench/notfound_rates.py``, ``bench/abstain_questions.py``,
``bench/shared_data.py``); importing this module first makes those importable
when a tool is run as ``python tools/NAME.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))
