"""``/metrics`` in the Prometheus text format (prometheus_client), one registry per server.

Names (all prefixed ``clawkb_``):

=====================================  =========  ==================================
http_requests_total                    counter    endpoint, method, status
http_request_seconds                   histogram  endpoint
search_seconds                         histogram  mode, stage (``total`` = whole call)
search_cache_hits_total                counter    result-cache hits of the pipeline
documents / chunks / vectors / segments gauge     read from the store at scrape time
index_runs_total                       counter    trigger (api, upload, watch, pin)
ingest_errors_total                    counter    type (file extension)
llm_calls_total                        counter    outcome (llm, extractive, abstain, error)
llm_seconds                            histogram  model call time
llm_tokens_total                       counter    streamed pieces received from the model
watch_queue_depth                      gauge      changed paths waiting for the next run
watch_lag_seconds                      histogram  first event of a batch -> searchable
gc_frozen_objects                      gauge      objects the answering process froze
                                                  out of full collections (collector.py)
gil_switch_interval_seconds            gauge      the answering process's GIL turn
                                                  (switching.py)
=====================================  =========  ==================================
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from clawkb.answer.core import Answer
    from clawkb.ingest.pipeline import IndexReport
    from clawkb.retrieve.result import SearchResult

_FOLDER_VAR = "PROMETHEUS_MULTIPROC_DIR"
_FAST = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_SLOW = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120)


class _StoreCounts(Collector):
    """Documents, chunks, vectors and segments, read when Prometheus scrapes."""

    def __init__(self, status: Callable[[], dict[str, Any]]) -> None:
        self.status = status

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            s = self.status()
        except Exception:  # a scrape must not fail because the KB is busy
            return
        dense = s.get("dense") or {}
        values = {
            "documents": s.get("documents", 0),
            "chunks": s.get("chunks", 0),
            "vectors": dense.get("vectors", 0) if isinstance(dense, dict) else 0,
            "segments": (s.get("lexical") or {}).get("segments", 0),
        }
        for name, value in values.items():
            g = GaugeMetricFamily(f"clawkb_{name}", f"{name.capitalize()} in the knowledge base")
            g.add_metric([], float(value if isinstance(value, int | float) else len(value)))
            yield g


def shared_folder() -> str | None:
    """The folder where the workers of ``serve --workers N`` keep their metric values."""
    return os.environ.get(_FOLDER_VAR) or None


def share_through(folder: str) -> None:
    """From now on (in this process and the workers it forks), metric values live in
    memory-mapped files in ``folder`` (prometheus_client's multiprocess mode), so a
    scrape answered by any worker counts them all. Called before any metric is made."""
    from prometheus_client import values

    os.environ[_FOLDER_VAR] = folder
    values.ValueClass = values.MultiProcessValue()


def worker_ended(pid: int) -> None:
    """A worker ended: its live gauges no longer count."""
    from prometheus_client import multiprocess

    if shared_folder():
        multiprocess.mark_process_dead(pid)


class _Process(Collector):
    """The answering process's own settings: objects in its permanent collector
    generation (collector.py) and its GIL switch interval (switching.py)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from clawkb.server import collector

        g = GaugeMetricFamily(
            "clawkb_gc_frozen_objects", "Objects kept out of full garbage collections"
        )
        g.add_metric([], collector.frozen())
        yield g
        s = GaugeMetricFamily(
            "clawkb_gil_switch_interval_seconds", "How long a thread holds the GIL per turn"
        )
        s.add_metric([], sys.getswitchinterval())
        yield s


class Metrics:
    def __init__(self, status: Callable[[], dict[str, Any]] | None = None) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter(
            "clawkb_http_requests", "HTTP requests", ["endpoint", "method", "status"], registry=r
        )
        self.request_seconds = Histogram(
            "clawkb_http_request_seconds", "HTTP request latency", ["endpoint"], buckets=_FAST,
            registry=r,
        )  # fmt: skip
        self.search_seconds = Histogram(
            "clawkb_search_seconds", "Search latency by mode and stage", ["mode", "stage"],
            buckets=_FAST, registry=r,
        )  # fmt: skip
        self.cache_hits = Counter("clawkb_search_cache_hits", "Result cache hits", registry=r)
        self.index_runs = Counter("clawkb_index_runs", "Indexing runs", ["trigger"], registry=r)
        self.ingest_errors = Counter(
            "clawkb_ingest_errors", "Files that failed to ingest", ["type"], registry=r
        )
        self.llm_calls = Counter("clawkb_llm_calls", "Answers by outcome", ["outcome"], registry=r)
        self.llm_seconds = Histogram(
            "clawkb_llm_seconds", "Model call latency", buckets=_SLOW, registry=r
        )
        self.llm_tokens = Counter("clawkb_llm_tokens", "Streamed model tokens", registry=r)
        self.watch_queue = Gauge(
            "clawkb_watch_queue_depth", "Paths waiting", registry=r, multiprocess_mode="livesum"
        )
        self.watch_lag = Histogram(
            "clawkb_watch_lag_seconds", "File event to searchable", buckets=_SLOW, registry=r
        )
        self._status = status
        if status is not None:
            r.register(_StoreCounts(status))
        r.register(_Process())

    def render(self) -> bytes:
        if not shared_folder():
            return generate_latest(self.registry)
        # `serve --workers N`: every worker's counts, summed from the shared folder
        from prometheus_client.multiprocess import MultiProcessCollector

        scrape = CollectorRegistry()
        MultiProcessCollector(scrape)
        if self._status is not None:
            scrape.register(_StoreCounts(self._status))
        scrape.register(_Process())
        return generate_latest(scrape)

    def observe_request(self, endpoint: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(endpoint, method, str(status)).inc()
        self.request_seconds.labels(endpoint).observe(seconds)

    def observe_search(self, res: SearchResult, seconds: float) -> None:
        mode = res.mode or "lexical"
        self.search_seconds.labels(mode, "total").observe(seconds)
        for s in res.stages:
            self.search_seconds.labels(mode, str(s.get("stage"))).observe(
                float(s.get("ms", 0)) / 1000
            )
            if s.get("stage") == "cache" and s.get("status") == "hit":
                self.cache_hits.inc()

    def observe_run(self, report: IndexReport, trigger: str) -> None:
        self.index_runs.labels(trigger).inc()
        for path, _ in report.errors:
            ext = os.path.splitext(path)[1].lower() or "(none)"
            self.ingest_errors.labels(ext).inc()

    def observe_answer(self, res: Answer, seconds: float, tokens: int) -> None:
        self.llm_calls.labels(res.mode).inc()
        llm_ms = float(res.timings.get("llm", 0.0))
        if res.mode == "llm":
            self.llm_seconds.observe(llm_ms / 1000)
        if tokens:
            self.llm_tokens.inc(tokens)

    def observe_llm_error(self) -> None:
        self.llm_calls.labels("error").inc()
