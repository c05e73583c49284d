"""Per-queue and per-tenant gauges, read from the store when Prometheus scrapes.

Ready and running jobs are the store's state, not a process's: every process reading the same
store shows the same figures, so they are read at scrape time (``Backend.stats``) instead of
being counted. Each scrape reads one row per (queue, tenant) of the queues asked.

Tenant labels are bounded: each time series costs Prometheus memory for as long as it is
retained, and tenants are unbounded (one per customer, maybe millions). Per queue, only the
``top`` tenants with the most ready jobs (or, ``rank="wait"``, the oldest ready job) get a
series of their own; the other active tenants are summed under ``tenant="other"`` (their oldest
ready job: the oldest of them). Idle tenants (nothing ready or running) get none. The queue
totals count every tenant.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from fairq.contract import Backend, StatsParams, TenantStats
from fairq.errors import ConfigError
from fairq.instrument.extras import needs_extra

with needs_extra("metrics", "Prometheus metrics", "prometheus_client"):
    from prometheus_client.metrics_core import GaugeMetricFamily, Metric
    from prometheus_client.registry import Collector

log = logging.getLogger("fairq.instrument")

DEFAULT_TOP = 20
OTHER = "other"
RANKS = ("ready", "wait")


@dataclass
class _Sum:
    """The gauges of one label set: one tenant, or several summed."""

    ready: int = 0
    running: int = 0
    oldest_ready_at: float | None = None

    def add(self, row: TenantStats) -> None:
        self.ready += row.ready
        self.running += row.running
        if row.oldest_ready_at is not None and (
            self.oldest_ready_at is None or row.oldest_ready_at < self.oldest_ready_at
        ):
            self.oldest_ready_at = row.oldest_ready_at


class TenantGauges(Collector):
    """A collector of the store's per-queue and top-``top`` per-tenant gauges.

    ``store``: gives the store to read (called at each scrape, e.g. ``lambda: app.backend``).
    ``queues``: which queues (None: every queue the store has seen). ``top``: tenants per queue
    with series of their own (0: only ``other``). ``rank``: ``"ready"`` (most ready jobs
    first) or ``"wait"`` (oldest ready job first).
    """

    def __init__(
        self,
        store: Callable[[], Backend],
        *,
        queues: Sequence[str] | None = None,
        top: int = DEFAULT_TOP,
        rank: str = "ready",
        clock: Callable[[], float] = time.time,
    ) -> None:
        if isinstance(top, bool) or not isinstance(top, int) or top < 0:
            raise ConfigError(f"top must be a whole number of tenants (0 or more), got {top!r}")
        if rank not in RANKS:
            raise ConfigError(f"rank must be one of {', '.join(RANKS)}, got {rank!r}")
        self.store = store
        self.queues = None if queues is None else list(queues)
        self.top = top
        self.rank = rank
        self.clock = clock
        self._failing = False  # the last scrape could not read the store (logged once)

    def describe(self) -> Iterable[Metric]:
        """No samples: registering must not read the store."""
        return self._families()

    def collect(self) -> Iterable[Metric]:
        families = self._families()
        up, queue_fams, tenant_fams = families[0], families[1:7], families[7:]
        try:
            rows = self._rows()
        except Exception as exc:
            if not self._failing:
                log.warning("metrics: could not read the store's stats: %s", exc)
            self._failing = True
            up.add_metric([], 0)
            return [up]
        if self._failing:
            log.info("metrics: the store's stats can be read again")
        self._failing = False
        up.add_metric([], 1)
        now = self.clock()
        by_queue: dict[str, list[TenantStats]] = {}
        for row in rows:
            by_queue.setdefault(row.queue, []).append(row)
        for queue, queue_rows in by_queue.items():
            self._add_queue(queue, queue_rows, now, queue_fams)
            for tenant, summed in self._tenants(queue_rows):
                self._add_tenant(queue, tenant, summed, now, tenant_fams)
        return families

    def _rows(self) -> list[TenantStats]:
        backend = self.store()
        if self.queues is None:
            return backend.stats(StatsParams())
        rows: list[TenantStats] = []
        for queue in self.queues:
            rows += backend.stats(StatsParams(queue=queue))
        return rows

    def _tenants(self, rows: list[TenantStats]) -> Iterator[tuple[str, _Sum]]:
        """The top tenants one by one, then ``other`` (always, so its series stays)."""
        active = [r for r in rows if (r.ready or r.running) and r.tenant != OTHER]
        ranked = sorted(active, key=self._rank_key)
        other = _Sum()
        for row in ranked[self.top :]:
            other.add(row)
        for row in rows:  # a tenant named like the bucket is summed into it
            if row.tenant == OTHER:
                other.add(row)
        for row in ranked[: self.top]:
            own = _Sum()
            own.add(row)
            yield row.tenant, own
        yield OTHER, other

    def _rank_key(self, row: TenantStats) -> tuple[float, float, str]:
        if self.rank == "wait":
            oldest = math.inf if row.oldest_ready_at is None else row.oldest_ready_at
            return (oldest, -row.ready, row.tenant)
        return (-row.ready, -row.running, row.tenant)

    def _add_queue(
        self, queue: str, rows: list[TenantStats], now: float, fams: list[GaugeMetricFamily]
    ) -> None:
        ready, running, scheduled, dead, active, oldest = fams
        ready.add_metric([queue], sum(r.ready for r in rows))
        running.add_metric([queue], sum(r.running for r in rows))
        scheduled.add_metric([queue], sum(r.scheduled for r in rows))
        dead.add_metric([queue], sum(r.dead for r in rows))
        active.add_metric([queue], sum(1 for r in rows if r.ready or r.running))
        times = [r.oldest_ready_at for r in rows if r.ready and r.oldest_ready_at is not None]
        oldest.add_metric([queue], max(now - min(times), 0.0) if times else 0.0)

    def _add_tenant(
        self, queue: str, tenant: str, summed: _Sum, now: float, fams: list[GaugeMetricFamily]
    ) -> None:
        ready, running, oldest = fams
        labels = [queue, tenant]
        ready.add_metric(labels, summed.ready)
        running.add_metric(labels, summed.running)
        at = summed.oldest_ready_at
        oldest.add_metric(labels, max(now - at, 0.0) if summed.ready and at is not None else 0.0)

    def _families(self) -> list[GaugeMetricFamily]:
        def queue_gauge(name: str, doc: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=["queue"])

        def tenant_gauge(name: str, doc: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=["queue", "tenant"])

        return [
            GaugeMetricFamily("fairq_store_up", "1 if the last scrape could read the store."),
            queue_gauge("fairq_queue_ready_jobs", "Jobs ready in the queue, all tenants."),
            queue_gauge("fairq_queue_running_jobs", "Jobs leased to workers, all tenants."),
            queue_gauge("fairq_queue_scheduled_jobs", "Jobs waiting for their run-at time."),
            queue_gauge("fairq_queue_dead_jobs", "Dead jobs kept in the queue."),
            queue_gauge("fairq_queue_active_tenants", "Tenants with jobs ready or running."),
            queue_gauge("fairq_queue_oldest_ready_seconds", "Age of the queue's oldest ready job."),
            tenant_gauge(
                "fairq_tenant_ready_jobs",
                "Jobs ready, per top tenant (the rest summed as tenant=other).",
            ),
            tenant_gauge(
                "fairq_tenant_running_jobs",
                "Jobs running, per top tenant (the rest summed as tenant=other).",
            ),
            tenant_gauge(
                "fairq_tenant_oldest_ready_seconds",
                "Age of the tenant's oldest ready job (other: the oldest of the rest).",
            ),
        ]
