"""Prometheus metrics of one process, fed by the seam (extra ``fairq[metrics]``).

``App(url, middleware=[PrometheusMetrics()])``, or ``fairq worker APP --metrics-port 9100``,
which adds it and serves ``/metrics`` (``fairq.instrument.metrics_http``). Counters and
histograms of what this process did:

=================================  ===========================================================
``fairq_jobs_total``               attempts ended, by ``queue`` and ``outcome`` (succeeded,
                                   retrying, dead, lease_lost, handed_back, slice_ended,
                                   error, cancelled)
``fairq_job_run_seconds``          how long job functions ran to their end (succeeded or
                                   failed), by ``queue`` and ``job``
``fairq_job_wait_seconds``         how long each job dequeued here waited, ready, for a worker
                                   (``Lease.started_at - Lease.ready_at``), by ``queue``
``fairq_enqueued_total``           jobs this process enqueued, by the ``queue`` they went to
``fairq_lease_expiries_total``     leases this process's store calls expired (another worker
                                   died or hung), by ``queue`` and ``dead`` (true: no attempt
                                   left); a relayed job no worker claimed is not one
``fairq_relay_holds_lapsed_total`` relayed jobs no worker claimed before the relay's hold
                                   lapsed (its message was lost, or the relay died): ready
                                   again with no attempt spent, by ``queue``
``fairq_store_call_seconds``       every store call, by ``op`` (``Backend`` method name)
``fairq_store_errors_total``       store calls that raised, by ``op``
=================================  ===========================================================

The per-tenant gauges read from the store at scrape time are ``tenant_gauges.TenantGauges``.
Labels never carry a tenant here: these series are per process, and tenants are unbounded.

The hooks run on every job, so they only add to plain counters under one lock (about a
microsecond); the metric families are built when Prometheus scrapes (``collect``). The
prometheus_client metric objects cost several times more per observation (a lock per bucket
and per sum), which took a no-op job's drain over the design's 5 % budget.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Sequence

from fairq.contract import ExpiredLease
from fairq.errors import ConfigError
from fairq.instrument import JobEnd, Middleware, Outcome, StoreCall
from fairq.instrument.extras import needs_extra
from fairq.job import Lease, NewJob

with needs_extra("metrics", "Prometheus metrics", "prometheus_client"):
    from prometheus_client import REGISTRY, CollectorRegistry
    from prometheus_client.metrics_core import (
        CounterMetricFamily,
        HistogramMetricFamily,
        Metric,
    )
    from prometheus_client.registry import Collector

__all__ = ["RUN_BUCKETS", "STORE_BUCKETS", "WAIT_BUCKETS", "PrometheusMetrics"]

#: Job run times: from a no-op job to a long import.
RUN_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)
#: Waits: from a prompt dequeue to a tenant stuck behind its cap for an hour.
WAIT_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)
#: Store round trips: from a local Redis to a slow network.
STORE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)

Labels = tuple[str, ...]
#: The ends of attempts whose function ran to its end (``JobEnd.seconds`` is its run time,
#: 0 for a job that never ran); a hand-back, the end of a time slice or a cancel request cut
#: the run short.
RAN = frozenset(set(Outcome) - {Outcome.HANDED_BACK, Outcome.SLICE_ENDED, Outcome.CANCELLED})


class _Histogram:
    """Counts per bucket (not cumulative: Prometheus's ``le`` sums are made at scrape)."""

    __slots__ = ("counts", "total")

    def __init__(self, buckets: int) -> None:
        self.counts = [0] * (buckets + 1)  # the last one: above every bound (+Inf)
        self.total = 0.0


class PrometheusMetrics(Middleware):
    """Counts and times what this process does with jobs, served from ``registry`` (default:
    the ``prometheus_client`` global one, so your own metrics are served beside them). One per
    process and registry: a second one on the same registry is refused by prometheus_client."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        run_buckets: Sequence[float] = RUN_BUCKETS,
        wait_buckets: Sequence[float] = WAIT_BUCKETS,
        store_buckets: Sequence[float] = STORE_BUCKETS,
    ) -> None:
        self.registry = REGISTRY if registry is None else registry
        self.run_buckets = _bounds("run_buckets", run_buckets)
        self.wait_buckets = _bounds("wait_buckets", wait_buckets)
        self.store_buckets = _bounds("store_buckets", store_buckets)
        self._lock = threading.Lock()
        self._jobs: dict[tuple[str, Outcome], int] = {}  # (queue, outcome)
        self._enqueued: dict[Labels, int] = {}  # (queue,)
        self._expiries: dict[Labels, int] = {}  # (queue, dead)
        self._lapsed: dict[Labels, int] = {}  # (queue,)
        self._store_errors: dict[Labels, int] = {}  # (op,)
        self._run: dict[Labels, _Histogram] = {}  # (queue, job)
        self._wait: dict[Labels, _Histogram] = {}  # (queue,)
        self._store: dict[Labels, _Histogram] = {}  # (op,)
        self.registry.register(_Families(self))

    # -- the hooks: plain counts under one lock ----------------------------------------

    def _observe(
        self, table: dict[Labels, _Histogram], bounds: list[float], key: Labels, value: float
    ) -> None:
        index = bisect_left(bounds, value)  # the first bound >= value: its "le" bucket
        with self._lock:
            found = table.get(key)
            if found is None:
                found = table[key] = _Histogram(len(bounds))
            found.counts[index] += 1
            found.total += value

    def _count(self, table: dict[Labels, int], key: Labels, amount: int = 1) -> None:
        with self._lock:
            table[key] = table.get(key, 0) + amount

    def after_enqueue(
        self, jobs: Sequence[NewJob], queues: Sequence[str] | None, error: BaseException | None
    ) -> None:
        if not queues:
            return
        counts = Counter(queues)
        with self._lock:
            for queue, count in counts.items():
                self._enqueued[(queue,)] = self._enqueued.get((queue,), 0) + count

    def after_dequeue(self, leases: Sequence[Lease]) -> None:
        bounds = self.wait_buckets
        waits = [(lease.queue, max(lease.started_at - lease.ready_at, 0.0)) for lease in leases]
        with self._lock:  # once for the batch
            for queue, waited in waits:
                found = self._wait.get((queue,))
                if found is None:
                    found = self._wait[(queue,)] = _Histogram(len(bounds))
                found.counts[bisect_left(bounds, waited)] += 1
                found.total += waited

    def after_job(self, lease: Lease, end: JobEnd) -> None:
        """The attempt's outcome, and how long its function ran (one lock for both: this is
        the one hook of this plug-in every job calls on its own)."""
        outcome = (lease.queue, end.outcome)  # .value is a Python-level property: at scrape
        ran = end.outcome in RAN and end.seconds > 0.0
        if ran:
            run = (lease.queue, lease.name)
            index = bisect_left(self.run_buckets, end.seconds)
        with self._lock:
            self._jobs[outcome] = self._jobs.get(outcome, 0) + 1
            if ran:
                found = self._run.get(run)
                if found is None:
                    found = self._run[run] = _Histogram(len(self.run_buckets))
                found.counts[index] += 1
                found.total += end.seconds

    def lease_expired(self, expired: ExpiredLease) -> None:
        if not expired.claimed:  # never ran: no worker died, a message or a relay was lost
            self._count(self._lapsed, (expired.queue,))
            return
        self._count(self._expiries, (expired.queue, "true" if expired.dead else "false"))

    def store_call(self, call: StoreCall) -> None:
        self._observe(self._store, self.store_buckets, (call.op,), call.seconds)
        if call.error is not None:
            self._count(self._store_errors, (call.op,))

    # -- at scrape time ----------------------------------------------------------------

    def families(self, *, samples: bool = True) -> list[Metric]:
        """The metric families, with their samples (a copy taken under the lock)."""
        with self._lock:
            counters: list[tuple[str, str, list[str], dict[Labels, int]]] = [
                ("fairq_jobs", "Job attempts ended, by outcome.", ["queue", "outcome"],
                 {(queue, outcome.value): n for (queue, outcome), n in self._jobs.items()}),
                ("fairq_enqueued", "Jobs enqueued by this process.", ["queue"],
                 dict(self._enqueued)),
                ("fairq_lease_expiries",
                 "Leases expired by this process's store calls (their worker died or hung).",
                 ["queue", "dead"], dict(self._expiries)),
                ("fairq_relay_holds_lapsed",
                 "Relayed jobs no worker claimed before the relay's hold lapsed.", ["queue"],
                 dict(self._lapsed)),
                ("fairq_store_errors", "Store calls that raised.", ["op"],
                 dict(self._store_errors)),
            ]  # fmt: skip
            histograms: list[
                tuple[str, str, list[str], list[float], dict[Labels, tuple[list[int], float]]]
            ] = [
                ("fairq_job_run_seconds", "Seconds job functions ran.", ["queue", "job"],
                 self.run_buckets, _copy(self._run)),
                ("fairq_job_wait_seconds",
                 "Seconds jobs waited, ready, before a worker took them.", ["queue"],
                 self.wait_buckets, _copy(self._wait)),
                ("fairq_store_call_seconds", "Seconds per store call.", ["op"],
                 self.store_buckets, _copy(self._store)),
            ]  # fmt: skip
        found: list[Metric] = []
        for name, doc, labels, counts in counters:
            counter = CounterMetricFamily(name, doc, labels=labels)
            for key, value in counts.items() if samples else ():
                counter.add_metric(list(key), value)
            found.append(counter)
        for name, doc, labels, bounds, table in histograms:
            histogram = HistogramMetricFamily(name, doc, labels=labels)
            for key, (counts_, total) in table.items() if samples else ():
                histogram.add_metric(list(key), _cumulative(bounds, counts_), total)
            found.append(histogram)
        return found


class _Families(Collector):
    """What the registry asks at each scrape."""

    def __init__(self, metrics: PrometheusMetrics) -> None:
        self.metrics = metrics

    def describe(self) -> Iterable[Metric]:
        return self.metrics.families(samples=False)

    def collect(self) -> Iterable[Metric]:
        return self.metrics.families()


def _copy(table: dict[Labels, _Histogram]) -> dict[Labels, tuple[list[int], float]]:
    return {key: (list(h.counts), h.total) for key, h in table.items()}


def _cumulative(bounds: list[float], counts: list[int]) -> list[tuple[str, float]]:
    running = 0
    found = []
    for bound, count in zip([*bounds, float("inf")], counts, strict=True):
        running += count
        found.append(("+Inf" if bound == float("inf") else repr(bound), float(running)))
    return found


def _bounds(label: str, buckets: Sequence[float]) -> list[float]:
    bounds = [float(b) for b in buckets]
    if not bounds or bounds != sorted(set(bounds)) or bounds[-1] == float("inf"):
        raise ConfigError(
            f"{label} must be increasing finite bucket bounds (+Inf is added), got {buckets!r}"
        )
    return bounds
