"""Many workers at once: no job handed out twice, none lost, no tenant over its cap, and the
tags end exactly where one worker taking every job in turn would leave them."""

from __future__ import annotations

import threading
from collections import Counter

import psycopg

from fairq.contract import (
    AckManyParams,
    DequeueParams,
    EnqueueParams,
    GetJobsParams,
    MaintainParams,
    QueueSettings,
    SetQueueParams,
    StatsParams,
)
from fairq.job import JobState, NewJob

from ._store import CALLER_CLOCK, DisposableBackend, open_disposable, server_url

WORKERS = 8
TENANTS = ["a", "b", "c", "d"]
JOBS_PER_TENANT = 60
CAP = 2


def jobs() -> list[NewJob]:
    return [
        NewJob(id=f"{t}{n}", name="task", queue="default", tenant=t, payload="{}",
               run_at=0.0, max_attempts=3, lease_timeout=600.0, cost=1.0)
        for n in range(JOBS_PER_TENANT) for t in TENANTS
    ]  # fmt: skip


def test_concurrent_workers_never_share_a_job_or_break_a_cap(pg: DisposableBackend) -> None:
    pg.set_queue(SetQueueParams(settings=QueueSettings(queue="default", max_running=CAP), now=0.0))
    pg.enqueue(EnqueueParams(jobs=jobs(), now=0.0))
    taken: list[str] = []
    held: Counter[str] = Counter()
    over_cap: list[str] = []
    guard = threading.Lock()
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            while True:
                leases = pg.dequeue(
                    DequeueParams(queues=["default"], worker_id=f"w{worker}", now=1.0, limit=2)
                ).leases
                if not leases:
                    with guard:
                        if len(taken) == len(TENANTS) * JOBS_PER_TENANT:
                            return
                    continue
                with guard:
                    for lease in leases:
                        taken.append(lease.job_id)
                        held[lease.tenant] += 1
                        if held[lease.tenant] > CAP:
                            over_cap.append(lease.tenant)
                for lease in leases:
                    with guard:
                        held[lease.tenant] -= 1
                    pg.ack_many(AckManyParams(tokens=[lease.token], now=2.0))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert over_cap == []
    assert sorted(taken) == sorted(job.id for job in jobs())  # each exactly once
    for row in pg.stats(StatsParams(queue="default")):
        assert (row.ready, row.running, row.succeeded) == (0, 0, JOBS_PER_TENANT)
    infos = pg.get_jobs(GetJobsParams(ids=[job.id for job in jobs()]))
    assert {info.state for info in infos} == {JobState.SUCCEEDED}
    assert {info.attempts for info in infos} == {1}


def tags(store: DisposableBackend) -> tuple[object, ...]:
    """V and every tenant's tags, as stored (bit-exact doubles)."""
    with psycopg.connect(server_url(), **CALLER_CLOCK) as conn:
        vclock = conn.execute(f'SELECT vclock FROM "{store.schema}".queues').fetchall()
        tenants = conn.execute(
            f'SELECT tenant, finish_tag, start_tag FROM "{store.schema}".tenants ORDER BY tenant'
        ).fetchall()
    return vclock, tenants


def test_interleaved_dequeues_leave_the_tags_a_single_worker_would() -> None:
    """Dispatches of one queue are serialised, so over all workers the fair order, V and every
    tag end exactly as when one worker takes every job."""
    concurrent, single = open_disposable(), open_disposable()
    try:
        for store in (concurrent, single):
            store.enqueue(EnqueueParams(jobs=jobs(), now=0.0))
        expected = single.dequeue(
            DequeueParams(queues=["default"], worker_id="w", now=1.0, limit=10_000)
        ).leases
        order: list[tuple[float, str]] = []
        guard = threading.Lock()

        def work() -> None:
            while leases := concurrent.dequeue(
                DequeueParams(queues=["default"], worker_id="w", now=1.0, limit=3)
            ).leases:
                with guard:
                    order.extend((lease.started_at, lease.job_id) for lease in leases)

        threads = [threading.Thread(target=work) for _ in range(WORKERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(job_id for _, job_id in order) == sorted(lease.job_id for lease in expected)
        tenants = Counter(lease.tenant for lease in expected)
        assert set(tenants.values()) == {JOBS_PER_TENANT}
        assert tags(concurrent) == tags(single)
        assert concurrent.stats(StatsParams()) == single.stats(StatsParams())
    finally:
        concurrent.close()
        single.close()


def test_a_prune_forgetting_tenants_races_enqueues_of_those_tenants(pg: DisposableBackend) -> None:
    """Pruning covers every queue, also those whose lock maintenance does not hold: a tenant
    row it deletes may be the one a concurrent enqueue is about to lock. The enqueue creates it
    again; no job is lost and every job's tenant row exists."""
    rounds = 120
    errors: list[BaseException] = []
    done = threading.Event()

    def produce() -> None:
        try:
            for n in range(rounds):
                job = NewJob(id=f"p{n}", name="task", queue="other", tenant=f"t{n % 3}",
                             payload="{}", run_at=0.0, max_attempts=3, lease_timeout=600.0,
                             cost=1.0)  # fmt: skip
                pg.enqueue(EnqueueParams(jobs=[job], now=float(n)))
                (lease,) = pg.dequeue(DequeueParams(queues=["other"], worker_id="w", now=n)).leases
                pg.ack_many(AckManyParams(tokens=[lease.token], now=float(n)))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            done.set()

    def prune() -> None:
        try:
            while not done.is_set():
                pg.maintain(MaintainParams(now=1e9, queues=["default"], retention=0.0))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=produce), threading.Thread(target=prune)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    pg.maintain(MaintainParams(now=1e9, retention=0.0))
    assert pg.stats(StatsParams()) == []
    with psycopg.connect(server_url(), **CALLER_CLOCK) as conn:
        orphans = conn.execute(
            f'SELECT count(*) FROM "{pg.schema}".jobs j WHERE NOT EXISTS '
            f'(SELECT 1 FROM "{pg.schema}".tenants t WHERE t.id = j.tenant_id)'
        ).fetchone()
    assert orphans == (0,)
