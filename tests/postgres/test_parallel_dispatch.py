"""The bound of parallel dispatch (docs/internals/scheduler.md, "Parallel dispatch"), checked
against the real server: dispatchers in threads, each with its own store object (so its own
connections), dequeue one queue at once; afterwards every job handed out is checked against
the tags its tenant's rivals had at that moment.

Tags are known without asking the store: every tenant is backlogged from the start (all jobs
enqueued at once, V = 0), jobs cost 1 and nothing is acked, so the i-th job a tenant hands out
has the start tag 0 + 1/w + … (i terms, added as dispatch adds them) and its seq. The moment
of a call is bracketed by the time it began and ended (perf_counter around the call): the calls
that ended before it began are all committed and seen; those that overlap it are "running at
once". The bound then reads: at most ``allowance`` eligible tenants had a key smaller than the
picked job's, counted in the state the finished calls left (those calls only made rivals'
keys grow since, so the count can only be too high, never hide a violation):

* each overlapping call holds at most its limit's worth of tenants, and a call's picks may
  pass at most limit - 1 tenants it left unread: allowance = sum of the overlapping calls'
  limits + own limit - 1; with single-job dequeues, the number of calls running at once.

The check is shown to fail: on picks made at random, and on the real server with a dispatch
made to read its candidates in random order.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

import psycopg
import pytest

from fairq.backends.postgres import PostgresBackend
from fairq.backends.postgres.sql import fill_schema, function_files
from fairq.contract import DequeueParams, EnqueueParams, TenantSettingsParams
from fairq.job import NewJob

from ._store import CALLER_CLOCK, DisposableBackend, open_disposable, server_url, with_option

THREADS = 4


@dataclass
class Tenant:
    name: str
    weight: float
    jobs: list[str] = field(default_factory=list)  # ids, in FIFO (seq) order
    seqs: list[int] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)  # the start tag of each job, in order


@dataclass
class Call:
    began: float
    ended: float
    limit: int
    picked: list[str]  # job ids, in the order handed out


def plan(seed: int) -> list[Tenant]:
    """Tenants of random weights and backlogs (some run out early: eligibility changes)."""
    rng = random.Random(seed)
    tenants = []
    for n in range(20):
        tenant = Tenant(f"t{n:02}", float(rng.choice([1, 1, 2, 3])))
        tag = 0.0
        for _ in range(rng.randint(3, 25)):
            tenant.starts.append(tag)
            tag = tag + 1.0 / tenant.weight  # as dispatch adds it: F = S + cost / w
        tenants.append(tenant)
    return tenants


def fill(store: DisposableBackend, tenants: list[Tenant], seed: int) -> None:
    """Enqueue every tenant's jobs in one batch, interleaved at random; read the seqs back."""
    rng = random.Random(seed)
    for tenant in tenants:
        store.set_tenant(_weight(tenant))
    slots = [t for t in tenants for _ in t.starts]
    rng.shuffle(slots)
    jobs = []
    for n, tenant in enumerate(slots):
        job_id = f"{tenant.name}-{len(tenant.jobs)}-{n}"
        tenant.jobs.append(job_id)
        jobs.append(
            NewJob(id=job_id, name="task", queue="default", tenant=tenant.name, payload="{}",
                   run_at=0.0, max_attempts=1, lease_timeout=3600.0, cost=1.0)
        )  # fmt: skip
    store.enqueue(EnqueueParams(jobs=jobs, now=0.0))
    with psycopg.connect(server_url()) as conn:
        seqs = dict(conn.execute(f'SELECT id, seq FROM "{store.schema}".jobs').fetchall())
    for tenant in tenants:
        tenant.seqs = [seqs[job_id] for job_id in tenant.jobs]


def _weight(tenant: Tenant) -> TenantSettingsParams:
    return TenantSettingsParams(queue="default", tenant=tenant.name, now=0.0, weight=tenant.weight)


def dispatch_concurrently(store: DisposableBackend, limit: int) -> list[Call]:
    """THREADS dispatchers, each its own store object (own pool), dequeue until empty."""
    calls: list[Call] = []
    guard = threading.Lock()
    start = threading.Barrier(THREADS)
    url = with_option(server_url(), "clock", "caller")

    def work(worker: int) -> None:
        own = PostgresBackend(url, schema=store.schema)
        try:
            start.wait()
            while True:
                began = time.perf_counter()
                leases = own.dequeue(
                    DequeueParams(queues=["default"], worker_id=f"w{worker}", now=1.0,
                                  limit=limit)
                ).leases  # fmt: skip
                ended = time.perf_counter()
                with guard:
                    calls.append(Call(began, ended, limit, [lease.job_id for lease in leases]))
                if not leases:
                    return
        finally:
            own.close()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return calls


def violations(tenants: list[Tenant], calls: list[Call]) -> list[str]:
    """Every job handed out whose tenant had more smaller-keyed rivals than the bound allows."""
    owner = {job_id: (t, i) for t in tenants for i, job_id in enumerate(t.jobs)}
    found = []
    for call in calls:
        overlapping = [
            other for other in calls
            if other is not call and not (other.ended < call.began or call.ended < other.began)
        ]  # fmt: skip
        allowance = sum(other.limit for other in overlapping) + call.limit - 1
        taken = {t.name: 0 for t in tenants}
        for other in calls:
            if other.ended < call.began:
                for job_id in other.picked:
                    taken[owner[job_id][0].name] += 1
        for job_id in call.picked:
            tenant, index = owner[job_id]
            key = (tenant.starts[index], tenant.seqs[index])
            ahead = [
                rival.name for rival in tenants
                if rival is not tenant and taken[rival.name] < len(rival.starts)
                and (rival.starts[taken[rival.name]], rival.seqs[taken[rival.name]]) < key
            ]  # fmt: skip
            if len(ahead) > allowance:
                found.append(
                    f"{job_id} (key {key}) passed {len(ahead)} tenants {ahead}, allowed "
                    f"{allowance} ({len(overlapping)} calls overlapping)"
                )
            taken[tenant.name] += 1
    return found


def _every_job_once(tenants: list[Tenant], calls: list[Call]) -> None:
    handed = sorted(job_id for call in calls for job_id in call.picked)
    assert handed == sorted(job_id for t in tenants for job_id in t.jobs)


@pytest.mark.parametrize(("seed", "limit"), [(1, 1), (2, 1), (3, 3), (4, 5)])
def test_concurrent_dispatches_hand_out_within_the_bound(seed: int, limit: int) -> None:
    tenants = plan(seed)
    store = open_disposable()
    try:
        fill(store, tenants, seed)
        calls = dispatch_concurrently(store, limit)
    finally:
        store.close()
    _every_job_once(tenants, calls)
    assert sum(1 for call in calls if call.picked) > 0
    assert violations(tenants, calls) == []


def test_one_dispatcher_at_a_time_hands_out_in_the_exact_order() -> None:
    """No overlap: the allowance is limit - 1 = 0, every pick is the smallest key."""
    tenants = plan(5)
    store = open_disposable()
    try:
        fill(store, tenants, 5)
        calls = []
        while True:
            began = time.perf_counter()
            leases = store.dequeue(
                DequeueParams(queues=["default"], worker_id="w", now=1.0, limit=1)
            ).leases
            calls.append(Call(began, time.perf_counter(), 1, [lease.job_id for lease in leases]))
            if not leases:
                break
    finally:
        store.close()
    _every_job_once(tenants, calls)
    assert violations(tenants, calls) == []


def test_the_check_catches_picks_made_at_random() -> None:
    """The same check, on a log of single-job calls that each took a random eligible
    tenant's head (two at a time overlapping): it reports violations."""
    tenants = plan(6)
    for n, tenant in enumerate(tenants):
        tenant.jobs = [f"{tenant.name}-{i}" for i in range(len(tenant.starts))]
        tenant.seqs = [n * 100 + i for i in range(len(tenant.starts))]
    rng = random.Random(6)
    left = {t.name: 0 for t in tenants}
    calls = []
    clock = 0.0
    while any(left[t.name] < len(t.starts) for t in tenants):
        tenant = rng.choice([t for t in tenants if left[t.name] < len(t.starts)])
        calls.append(Call(clock, clock + 1.5, 1, [tenant.jobs[left[tenant.name]]]))
        left[tenant.name] += 1
        clock += 1.0
    assert len(violations(tenants, calls)) > len(calls) // 4


def test_the_check_catches_a_server_dispatch_that_breaks_the_rule() -> None:
    """The real server, its dispatch changed to read its candidates in random order instead of
    by key: the concurrent run now violates the bound, and the check says so."""
    tenants = plan(7)
    store = open_disposable()
    try:
        (dispatch,) = [f for f in function_files() if f.name == "dispatch.sql"]
        broken = fill_schema(dispatch.script, store.schema).replace(
            "CREATE FUNCTION", "CREATE OR REPLACE FUNCTION"
        )
        by_key = "ORDER BY e.start_tag, e.head_seq\n                 LIMIT p_read"
        assert broken.count(by_key) == 1
        broken = broken.replace(by_key, "ORDER BY random()\n                 LIMIT p_read")
        with psycopg.connect(server_url(), autocommit=True, **CALLER_CLOCK) as conn:
            conn.execute(broken)
        fill(store, tenants, 7)
        calls = dispatch_concurrently(store, 1)
    finally:
        store.close()
    _every_job_once(tenants, calls)
    assert len(violations(tenants, calls)) > 10
