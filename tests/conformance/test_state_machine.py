"""Random sequences of operations: the store under test agrees with the reference model exactly.

After every step both give the same leases, results, errors, stats (usage bit for bit), job
records and throttle windows, and the invariants hold: no job is lost, no job is held under two
live leases, no token is handed out twice, no tenant is handed a job over its cap, while paused,
or before its rate limit ends. (For kind "model" this compares two model instances: still a
check of determinism and of the invariants.)
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from fairq.contract import (
    KEEP,
    AckAndDequeueParams,
    AckManyParams,
    Backend,
    CheckpointParams,
    DequeueParams,
    EnqueueParams,
    ExpiredLease,
    FailParams,
    GetJobsParams,
    GetQueueParams,
    HeartbeatParams,
    ListDeadParams,
    MaintainParams,
    QueueSettings,
    ReleaseParams,
    RequeueParams,
    SetQueueParams,
    StatsParams,
    TenantSettingsParams,
    ThrottleWindowsParams,
)
from fairq.errors import FairqError
from fairq.job import JobInfo, JobState, Lease, NewJob, Progress
from fairq.policy.rate import Rate
from fairq.policy.throttle import Throttle

from .conftest import BACKENDS

TENANTS = ["a", "b", "c:d"]
QUEUES = ["default", "other"]
QUEUE_ORDERS = [("default",), ("other",), ("default", "other"), ("other", "default")]
ENDINGS = ["ack", "retry-now", "retry-later", "dead", "release", "keep"]
UNKNOWN_TOKEN = "nope:1"
RATES = [Rate(1, 5.0), Rate(2, 3.0, burst=2), Rate(3, 1.0, burst=3)]
#: Throttled job types, each with its one rule list as declared (home "default"). One list per
#: name, as an app declares it: a window's span never changes, so when a store expires a window
#: (Redis TTL, SQL maintenance) is not observable.
THROTTLES = {
    "sync": (Throttle(1, 10.0, "other"),),
    "bulk": (Throttle(2, 60.0, "other"),),
    "mixed": (Throttle(3, 100.0, "other"), Throttle(1, 2.0, "other")),
}

SETTINGS = settings(max_examples=50, stateful_step_count=40, deadline=None)


class StoreAgreesWithModel(RuleBasedStateMachine):
    """Runs every operation on the reference model (``spec``) and on the store under test."""

    make_store: Callable[[], Backend]

    def __init__(self) -> None:
        super().__init__()
        from fairq.model import ReferenceModel

        self.spec: Backend = ReferenceModel()
        self.store = self.make_store()
        self.now = 1000.0
        self.ids: list[str] = []  # every job ever enqueued, pruned or not
        self.pruned: set[str] = set()
        self.tokens: list[str] = []  # every token handed out, live or stale
        self.checkpoints = 0  # checkpoints tried, to give each a progress of its own
        self.latest: dict[str, str] = {}  # job id -> the token of its latest lease

    def both(self, call: Callable[[Backend], Any]) -> Any:
        """Call on both; they must return equal results or raise the same fairq error."""
        expected = _outcome(call, self.spec)
        assert _outcome(call, self.store) == expected
        return expected

    def live_tokens(self) -> set[str]:
        return {
            self.latest[j.id]
            for j in self.spec.get_jobs(GetJobsParams(ids=self.ids))
            if j.state is JobState.RUNNING and j.deadline is not None and j.deadline > self.now
        }

    def draw_token(self, data: st.DataObject) -> str:
        """Mostly a lease still held; sometimes any token ever handed out, or an unknown one."""
        live = sorted(self.live_tokens())
        anything = st.sampled_from([*self.tokens, UNKNOWN_TOKEN])
        return data.draw(st.one_of(st.sampled_from(live), anything) if live else anything)

    def add(self, jobs: list[NewJob]) -> None:
        self.both(lambda b: b.enqueue(EnqueueParams(jobs=jobs, now=self.now)).queues)
        self.ids += [j.id for j in jobs]

    def take(
        self, limit: int, queues: tuple[str, ...], acks: list[str] | None = None
    ) -> list[Lease]:
        """A dequeue, or (given ``acks``) an ack_and_dequeue; checked against the model."""
        live_before = {token.rsplit(":", 1)[0] for token in self.live_tokens()}
        before = {(row.queue, row.tenant): row for row in self.spec.stats(StatsParams())}
        params = DequeueParams(queues=queues, worker_id="w", now=self.now, limit=limit)
        if acks is None:
            status, found = self.both(lambda b: _dequeue(b, params))
        else:
            done = AckManyParams(tokens=acks, now=self.now)
            status, (_, _, found) = self.both(lambda b: _ack_and_dequeue(b, done, params))
        leases: list[Lease] = found[0]
        assert status == "ok"
        job_ids = [lease.job_id for lease in leases]
        assert len(set(job_ids)) == len(job_ids), "one job handed out twice in a batch"
        assert not set(job_ids) & live_before, "a job handed out while its lease is live"
        served = {(lease.queue, lease.tenant) for lease in leases}
        for key in served:  # a paused tenant is never served, a limited one not before its time
            assert before[key].weight > 0, before[key]
            until = before[key].limited_until
            assert until is None or until <= self.now, before[key]
        rows = self.store.stats(StatsParams())
        for row in rows:
            if (row.queue, row.tenant) in served:  # lowering a cap does not stop running jobs
                assert row.max_running is None or row.running <= row.max_running, row
        for queue in {lease.queue for lease in leases}:  # nor does lowering a queue's cap
            cap = self.spec.get_queue(GetQueueParams(queue=queue)).max_in_flight
            leased = sum(row.running for row in rows if row.queue == queue)
            assert cap is None or leased <= cap, (queue, leased, cap)
        for lease in leases:
            assert lease.token not in self.tokens, "a token handed out twice"
            self.tokens.append(lease.token)
            self.latest[lease.job_id] = lease.token
        return leases

    def end(self, token: str, how: str) -> None:
        now = self.now
        if how == "ack":
            self.both(lambda b: b.ack_many(AckManyParams(tokens=[token], now=now)))
        elif how == "release":
            self.both(lambda b: b.release(ReleaseParams(token=token, now=now)))
        elif how != "keep":
            retry_at = {"retry-now": now, "retry-later": now + 7.0, "dead": None}[how]
            params = FailParams(token=token, now=now, error=f"boom {now}", retry_at=retry_at)
            self.both(lambda b: b.fail(params))

    # -- rules ---------------------------------------------------------------------------

    @initialize(
        backlog=st.lists(
            st.tuples(st.sampled_from(TENANTS), st.sampled_from(QUEUES), st.integers(1, 4)),
            min_size=1,
            max_size=4,
        )
    )
    def start_with_a_backlog(self, backlog: list[tuple[str, str, int]]) -> None:
        for tenant, queue, count in backlog:
            self.add([_job(len(self.ids) + i, tenant, queue, self.now) for i in range(count)])

    @rule(
        tenant=st.sampled_from(TENANTS),
        queue=st.sampled_from(QUEUES),
        count=st.integers(1, 3),
        priority=st.integers(-1, 1),
        delay=st.sampled_from([0.0, 0.0, 0.0, 5.0, 50.0]),
        max_attempts=st.integers(1, 3),
        lease=st.sampled_from([5.0, 30.0]),
        cost=st.sampled_from([0.5, 1.0, 4.0]),
    )
    def enqueue(self, tenant: str, queue: str, count: int, **options: Any) -> None:
        self.add(
            [_job(len(self.ids) + i, tenant, queue, self.now, **options) for i in range(count)]
        )

    @precondition(lambda self: bool(self.ids))
    @rule(limit=st.integers(1, 3), queues=st.sampled_from(QUEUE_ORDERS))
    def dequeue(self, limit: int, queues: tuple[str, ...]) -> None:
        self.take(limit, queues)

    @precondition(lambda self: bool(self.ids))
    @rule(
        queues=st.sampled_from(QUEUE_ORDERS),
        endings=st.lists(st.sampled_from(ENDINGS), min_size=1, max_size=3),
        run=st.sampled_from([0.0, 0.001, 1.0, 4.0]),
    )
    def work(self, queues: tuple[str, ...], endings: list[str], run: float) -> None:
        """A worker takes jobs, runs them for ``run`` seconds, and ends each as drawn."""
        leases = self.take(len(endings), queues)
        self.now += run
        for lease, how in zip(leases, endings, strict=False):
            self.end(lease.token, how)

    @precondition(lambda self: bool(self.tokens))
    @rule(data=st.data(), how=st.sampled_from(ENDINGS[:-1]))
    def end_a_lease(self, data: st.DataObject, how: str) -> None:
        self.end(self.draw_token(data), how)

    @precondition(lambda self: bool(self.tokens))
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        tokens = data.draw(st.lists(st.sampled_from([*self.tokens, UNKNOWN_TOKEN]), unique=True))
        params = HeartbeatParams(tokens=tokens, now=self.now)
        self.both(lambda b: _heartbeat(b, params))

    @precondition(lambda self: bool(self.tokens))
    @rule(data=st.data())
    def checkpoint(self, data: st.DataObject) -> None:
        """An iterative job stores its progress: a heartbeat of one lease, or refused."""
        self.checkpoints += 1
        progress = Progress(cursor={"n": self.checkpoints}, items=self.checkpoints).encode()
        params = CheckpointParams(token=self.draw_token(data), progress=progress, now=self.now)
        self.both(lambda b: b.checkpoint(params))

    @precondition(lambda self: bool(self.tokens))
    @rule(data=st.data())
    def ack_many(self, data: st.DataObject) -> None:
        params = AckManyParams(tokens=self.draw_acks(data), now=self.now)
        self.both(lambda b: _ack_many(b, params))

    @precondition(lambda self: bool(self.tokens))
    @rule(data=st.data(), limit=st.integers(1, 4), queues=st.sampled_from(QUEUE_ORDERS))
    def ack_and_dequeue(self, data: st.DataObject, limit: int, queues: tuple[str, ...]) -> None:
        """A busy worker stores its finished jobs and fills their slots in one step."""
        self.take(limit, queues, acks=self.draw_acks(data))

    def draw_acks(self, data: st.DataObject) -> list[str]:
        """Mostly live leases, in any order; sometimes stale, unknown or repeated tokens."""
        live = sorted(self.live_tokens())
        token = st.one_of(st.sampled_from(live), st.sampled_from([*self.tokens, UNKNOWN_TOKEN]))
        return data.draw(st.lists(token if live else st.sampled_from(self.tokens), max_size=6))

    @precondition(lambda self: bool(self.tokens))
    @rule(seconds=st.sampled_from([0.5, 2.0, 4.0, 9.0]))
    def run_on_with_heartbeats(self, seconds: float) -> None:
        """Time passes while the live leases run; their heartbeats charge the elapsed time."""
        self.now += seconds
        params = HeartbeatParams(tokens=sorted(self.live_tokens()), now=self.now)
        self.both(lambda b: _heartbeat(b, params))

    @rule(
        tenant=st.sampled_from(TENANTS),
        count=st.integers(1, 3),
        name=st.sampled_from(sorted(THROTTLES)),
    )
    def enqueue_with_throttle_rules(self, tenant: str, count: int, name: str) -> None:
        rules = THROTTLES[name]
        jobs = [
            replace(_job(len(self.ids) + i, tenant, "default", self.now), name=name, throttle=rules)
            for i in range(count)
        ]
        self.add(jobs)
        keys = [(n, t) for n in ("task", *THROTTLES) for t in TENANTS]
        self.both(lambda b: b.throttle_windows(ThrottleWindowsParams(keys=keys, now=self.now)))

    @rule(seconds=st.sampled_from([0.001, 0.5, 1.0, 1.0, 2.0, 3.0, 7.0, 12.0, 45.0]))
    def advance_clock(self, seconds: float) -> None:
        self.now += seconds

    @rule(
        queues=st.sampled_from([None, ("default",), ("other",)]),
        retention=st.sampled_from([None, None, 0.0, 5.0, 30.0]),
    )
    def maintain(self, queues: tuple[str, ...] | None, retention: float | None) -> None:
        """With a retention, pruning may forget tenants: the stores must forget the same."""
        params = MaintainParams(now=self.now, queues=queues, retention=retention)
        self.both(lambda b: b.maintain(params))
        kept = {j.id for j in self.spec.get_jobs(GetJobsParams(ids=self.ids))}
        self.pruned = set(self.ids) - kept

    @precondition(lambda self: bool(self.ids))
    @rule()
    def drain_and_prune(self) -> None:
        """Run every job that can run now to success, then prune them all: tenants left with
        nothing stored are forgotten (and may come back later as new ones)."""
        for _ in range(20):
            leases = self.take(3, ("default", "other"))
            if not leases:
                break
            for lease in leases:
                self.end(lease.token, "ack")
        self.now += 1.0
        self.maintain(None, 0.5)

    @rule(
        tenant=st.sampled_from(TENANTS),
        queue=st.sampled_from(QUEUES),
        weight=st.sampled_from([KEEP, None, 0.0, 0.5, 1.0, 3.0]),
        cap=st.sampled_from([KEEP, None, 1, 2]),
        rate=st.sampled_from([KEEP, KEEP, None, *RATES]),
    )
    def set_tenant(self, tenant: str, queue: str, weight: Any, cap: Any, rate: Any) -> None:
        """Weights include 0 (paused); rates are set, changed and removed at run time."""
        params = TenantSettingsParams(
            queue=queue, tenant=tenant, now=self.now, weight=weight, max_running=cap, rate=rate
        )
        self.both(lambda b: b.set_tenant(params))

    @rule(
        queue=st.sampled_from(QUEUES),
        weight=st.sampled_from([1.0, 2.0]),
        cap=st.sampled_from([None, 1, 3]),
        rate=st.sampled_from([None, None, *RATES]),
        half_life=st.sampled_from([None, 5.0, 30.0]),
        max_debt=st.sampled_from([60.0, 2.0]),
        in_flight=st.sampled_from([None, None, 1, 2, 4]),
    )
    def set_queue_defaults(
        self,
        queue: str,
        weight: float,
        cap: int | None,
        rate: Rate | None,
        half_life: float | None,
        max_debt: float,
        in_flight: int | None,
    ) -> None:
        """``in_flight``: the queue's cap on leased jobs, set, changed (below what is leased
        too) and removed at run time."""
        defaults = QueueSettings(
            queue=queue,
            weight=weight,
            max_running=cap,
            rate=rate,
            half_life=half_life,
            max_debt=max_debt,
            max_in_flight=in_flight,
        )
        self.both(lambda b: b.set_queue(SetQueueParams(settings=defaults, now=self.now)))
        self.both(lambda b: b.get_queue(GetQueueParams(queue=queue)))

    @precondition(lambda self: bool(self.ids))
    @rule(data=st.data())
    def requeue_dead(self, data: st.DataObject) -> None:
        dead = [j.id for j in self.spec.list_dead(ListDeadParams(limit=1000))]
        ids = data.draw(st.lists(st.sampled_from([*dead, self.ids[0]]), unique=True))
        self.both(lambda b: b.requeue(RequeueParams(ids=ids, now=self.now)))

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def both_agree_and_no_job_is_lost(self) -> None:
        """Same stats, jobs and dead letters; every job counted once; runs match leases."""
        _, rows = self.both(lambda b: b.stats(StatsParams()))
        self.both(lambda b: b.stats(StatsParams(now=self.now)))  # usage decayed to now
        _, jobs = self.both(lambda b: _jobs(b, self.ids))
        self.both(lambda b: b.list_dead(ListDeadParams(limit=1000)))
        states = Counter(j.state for j in jobs)
        assert len(jobs) == len(self.ids) - len(self.pruned)
        for state in JobState:
            counted = sum(getattr(row, state.value) for row in rows)
            if state is JobState.SUCCEEDED:  # lifetime totals; pruned jobs are not stored
                assert counted >= states[state]
            else:
                assert counted == states[state], state
        running = {j.id for j in jobs if j.state is JobState.RUNNING}
        assert running <= set(self.latest), "a job runs under a lease never handed out"


def _job(
    n: int,
    tenant: str,
    queue: str,
    now: float,
    *,
    priority: int = 0,
    delay: float = 0.0,
    max_attempts: int = 2,
    lease: float = 30.0,
    cost: float = 1.0,
) -> NewJob:
    return NewJob(
        id=f"j{n}",
        name="task",
        queue=queue,
        tenant=tenant,
        payload=f'{{"args":[{n}],"kwargs":{{}}}}',
        priority=priority,
        run_at=now + delay,
        max_attempts=max_attempts,
        lease_timeout=lease,
        cost=cost,
    )


def _outcome(call: Callable[[Backend], Any], backend: Backend) -> tuple[str, Any]:
    try:
        return ("ok", call(backend))
    except FairqError as exc:
        return ("raised", type(exc).__name__)


def _jobs(backend: Backend, ids: list[str]) -> list[JobInfo]:
    """The jobs, a succeeded one's progress left out: a store may drop it (JobInfo.progress)."""
    return [
        replace(j, progress=None) if j.state is JobState.SUCCEEDED else j
        for j in backend.get_jobs(GetJobsParams(ids=ids))
    ]


def _heartbeat(backend: Backend, params: HeartbeatParams) -> tuple[dict[str, float], list[str]]:
    result = backend.heartbeat(params)
    return dict(result.deadlines), sorted(result.lost)


def _ack_many(backend: Backend, params: AckManyParams) -> tuple[list[str], list[str]]:
    result = backend.ack_many(params)
    return list(result.acked), list(result.lost)


def _dequeue(backend: Backend, params: DequeueParams) -> tuple[list[Lease], list[ExpiredLease]]:
    result = backend.dequeue(params)
    return list(result.leases), list(result.expired)


def _ack_and_dequeue(
    backend: Backend, acks: AckManyParams, params: DequeueParams
) -> tuple[list[str], list[str], tuple[list[Lease], list[ExpiredLease]]]:
    result = backend.ack_and_dequeue(AckAndDequeueParams(acks=acks, dequeue=params))
    dequeued = (list(result.dequeue.leases), list(result.dequeue.expired))
    return list(result.acks.acked), list(result.acks.lost), dequeued


def test_every_store_agrees_with_the_reference(kind: str, tmp_path: Path) -> None:
    """Each example opens a fresh store and closes it at its end (a PostgreSQL store's schema
    is then emptied for the next: tests/postgres/_store.py)."""
    numbers = itertools.count()

    class Machine(StoreAgreesWithModel):
        @staticmethod
        def make_store() -> Backend:
            directory = tmp_path / f"store{next(numbers)}"
            directory.mkdir()
            return BACKENDS[kind](directory)

        def teardown(self) -> None:
            self.store.close()

    run_state_machine_as_test(Machine, settings=SETTINGS)
