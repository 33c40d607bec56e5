"""Retrieval evaluation: BEIR-layout datasets, ranking metrics, golden checks.

``evaluate_dataset`` scores a dataset in a throw-away knowledge base;
``check_golden`` (:mod:`clawkb.retrieve.golden`, below the features that read
golden files) runs a hand-written list of must-find queries against an open one.
Metrics follow pytrec_eval's definitions (see :mod:`.metrics`).
"""

from clawkb.evaluate.beir import BeirDataset, BeirDoc, BeirQuery, load_beir
from clawkb.evaluate.metrics import hit_at_k, mrr_at_k, ndcg_at_k, recall_at_k
from clawkb.evaluate.runner import EvalReport, QueryResult, evaluate_dataset
from clawkb.retrieve.golden import (
    GoldenQuery,
    GoldenReport,
    GoldenResult,
    GoldenSet,
    check_golden,
    load_golden,
)

__all__ = [
    "BeirDataset",
    "BeirDoc",
    "BeirQuery",
    "EvalReport",
    "GoldenQuery",
    "GoldenReport",
    "GoldenResult",
    "GoldenSet",
    "QueryResult",
    "check_golden",
    "evaluate_dataset",
    "hit_at_k",
    "load_beir",
    "load_golden",
    "mrr_at_k",
    "ndcg_at_k",
    "recall_at_k",
]
