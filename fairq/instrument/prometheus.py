"""Prometheus metrics of one process, fed by the seam (extra ``fairq[metrics]``).

``App(url, middleware=[PrometheusMetrics()])``, or ``fairq worker APP --metrics-port 9100``,
which adds it and serves ``/metrics`` (``fairq.instrument.metrics_http``). Counters and
histograms of what this process did:

=================================  ===========================================================
``fairq_jobs_total``               attempts ended, by ``queue`` and ``outcome`` (succeeded,
                                   retrying, dead, lease_lost, handed_back, error)
``fairq_job_run_seconds``          how long job functions ran, by ``queue`` and ``job``
``fairq_job_wait_seconds``         how long each job dequeued here waited, ready, for a worker
                                   (``Lease.started_at - Lease.ready_at``), by ``queue``
``fairq_enqueued_total``           jobs this process enqueued, by the ``queue`` they went to
``fairq_lease_expiries_total``     leases this process's store calls expired (another worker
                                   died or hung), by ``queue`` and ``dead`` (true: no attempt
                                   left)
``fairq_store_call_seconds``       every store call, by ``op`` (``Backend`` method name)
``fairq_store_errors_total``       store calls that raised, by ``op``
=================================  ===========================================================

The per-tenant gauges read from the store at scrape time are ``tenant_gauges.TenantGauges``.
Labels never carry a tenant here: these series are per process, and tenants are unbounded.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from fairq.contract import ExpiredLease
from fairq.instrument import JobEnd, Middleware, StoreCall
from fairq.instrument.extras import needs_extra
from fairq.job import Lease, NewJob

with needs_extra("metrics", "Prometheus metrics", "prometheus_client"):
    from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

__all__ = ["RUN_BUCKETS", "STORE_BUCKETS", "WAIT_BUCKETS", "PrometheusMetrics"]

#: Job run times: from a no-op job to a long import.
RUN_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)
#: Waits: from a prompt dequeue to a tenant stuck behind its cap for an hour.
WAIT_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)
#: Store round trips: from a local Redis to a slow network.
STORE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class PrometheusMetrics(Middleware):
    """Counts and times what this process does with jobs, in ``registry`` (default: the
    ``prometheus_client`` global one, so your own metrics are served beside them). One per
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
        reg = self.registry
        self.jobs = Counter(
            "fairq_jobs", "Job attempts ended, by outcome.", ["queue", "outcome"], registry=reg
        )
        self.run_seconds = Histogram(
            "fairq_job_run_seconds",
            "Seconds job functions ran.",
            ["queue", "job"],
            buckets=run_buckets,
            registry=reg,
        )
        self.wait_seconds = Histogram(
            "fairq_job_wait_seconds",
            "Seconds jobs waited, ready, before a worker took them.",
            ["queue"],
            buckets=wait_buckets,
            registry=reg,
        )
        self.enqueued = Counter(
            "fairq_enqueued", "Jobs enqueued by this process.", ["queue"], registry=reg
        )
        self.expiries = Counter(
            "fairq_lease_expiries",
            "Leases expired by this process's store calls (their worker died or hung).",
            ["queue", "dead"],
            registry=reg,
        )
        self.store_seconds = Histogram(
            "fairq_store_call_seconds",
            "Seconds per store call.",
            ["op"],
            buckets=store_buckets,
            registry=reg,
        )
        self.store_errors = Counter(
            "fairq_store_errors", "Store calls that raised.", ["op"], registry=reg
        )
        # Labelled children, looked up once per label set: .labels() costs more than the count.
        self._children: dict[tuple[object, ...], Any] = {}
        self._lock = threading.Lock()

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            with self._lock:
                child = self._children.get(key)
                if child is None:
                    child = self._children[key] = metric.labels(*labels)
        return child

    def after_enqueue(
        self, jobs: Sequence[NewJob], queues: Sequence[str] | None, error: BaseException | None
    ) -> None:
        for queue in queues or ():
            self._child(self.enqueued, queue).inc()

    def after_dequeue(self, leases: Sequence[Lease]) -> None:
        for lease in leases:
            waited = lease.started_at - lease.ready_at
            self._child(self.wait_seconds, lease.queue).observe(max(waited, 0.0))

    def after_run(self, lease: Lease, error: BaseException | None, seconds: float) -> None:
        self._child(self.run_seconds, lease.queue, lease.name).observe(seconds)

    def after_job(self, lease: Lease, end: JobEnd) -> None:
        self._child(self.jobs, lease.queue, end.outcome.value).inc()

    def lease_expired(self, expired: ExpiredLease) -> None:
        self._child(self.expiries, expired.queue, "true" if expired.dead else "false").inc()

    def store_call(self, call: StoreCall) -> None:
        self._child(self.store_seconds, call.op).observe(call.seconds)
        if call.error is not None:
            self._child(self.store_errors, call.op).inc()
