"""Random runs with every issue-5 rule switched on: SQLite agrees with the model, bit for bit.

Rate limits (queue default and tenant override, with bursts), paused tenants, charging by
heartbeat, history-aware starts (half-life, max debt), throttle routing, learned costs (jobs
that learn and jobs that keep their cost) and the relay's unclaimed leases (dequeue with a
hold, heartbeats that hold or claim), mixed with the ordinary events. After every step the two
give equal leases (the estimates charged), results, stats (usage decayed to ``now``), jobs,
throttle windows and learned costs: floats compared with ``==``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
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
)

from fairq.backends.clock import Clock
from fairq.backends.sqlite import SQLiteBackend
from fairq.contract import (
    KEEP,
    AckManyParams,
    Backend,
    DequeueParams,
    EnqueueParams,
    FailParams,
    GetJobsParams,
    GetQueueParams,
    HeartbeatParams,
    JobCostsParams,
    MaintainParams,
    QueueSettings,
    ReleaseParams,
    SetQueueParams,
    StatsParams,
    TenantSettingsParams,
    ThrottleWindowsParams,
)
from fairq.errors import FairqError
from fairq.job import JobState, NewJob
from fairq.model import ReferenceModel
from fairq.policy.rate import Rate
from fairq.policy.throttle import Throttle

TENANTS = ["a", "b", "c"]
QUEUES = ["default", "slow"]
RATES = [None, Rate(1, 5.0), Rate(3, 10.0, burst=2), Rate(2, 1.0, burst=3)]
RULES: dict[str, tuple[Throttle, ...]] = {
    "plain": (),
    "throttled": (Throttle(2, 30.0, "slow"),),
    "stepped": (Throttle(1, 100.0, "slow"), Throttle(3, 20.0, "other")),
}
ENDINGS = ["ack", "retry-now", "retry-later", "dead", "release", "keep", "hold", "claim"]
HOLD = 3.0


class LimitsAgree(RuleBasedStateMachine):
    directory: Path

    def __init__(self) -> None:
        super().__init__()
        self.spec = ReferenceModel()
        self.store = SQLiteBackend(
            self.directory / f"{uuid.uuid4().hex}.db", clock=Clock.CALLER
        )  # fresh per run
        self.now = 1000.0
        self.ids: list[str] = []
        self.live: list[str] = []

    def teardown(self) -> None:
        self.store.close()

    def both(self, call: Callable[[Backend], Any]) -> Any:
        expected = _outcome(call, self.spec)
        assert _outcome(call, self.store) == expected
        return expected

    @rule(
        tenant=st.sampled_from(TENANTS),
        kind=st.sampled_from(sorted(RULES)),
        count=st.integers(1, 3),
        delay=st.sampled_from([0.0, 0.0, 3.0]),
        cost=st.sampled_from([0.5, 1.0, 4.0]),
        learn=st.sampled_from([True, True, False]),
    )
    def enqueue(
        self, tenant: str, kind: str, count: int, delay: float, cost: float, learn: bool
    ) -> None:
        jobs = [
            NewJob(
                id=f"j{len(self.ids) + i}",
                name=kind,
                queue="default",
                tenant=tenant,
                payload="{}",
                run_at=self.now + delay,
                max_attempts=2,
                lease_timeout=20.0,
                cost=cost,
                learn_cost=learn,
                throttle=RULES[kind],
            )
            for i in range(count)
        ]
        self.both(lambda b: b.enqueue(EnqueueParams(jobs=jobs, now=self.now)).queues)
        self.ids += [job.id for job in jobs]

    @rule(
        limit=st.integers(1, 3),
        queues=st.sampled_from([("default",), ("slow", "default")]),
        hold=st.sampled_from([None, None, HOLD]),
    )
    def dequeue(self, limit: int, queues: tuple[str, ...], hold: float | None) -> None:
        params = DequeueParams(queues=queues, worker_id="w", now=self.now, limit=limit, hold=hold)
        _, leases = self.both(lambda b: b.dequeue(params).leases)
        self.live += [lease.token for lease in leases]

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data(), how=st.sampled_from(ENDINGS))
    def end(self, data: st.DataObject, how: str) -> None:
        token = data.draw(st.sampled_from(self.live))
        now = self.now
        if how == "ack":
            self.both(lambda b: b.ack_many(AckManyParams(tokens=[token], now=now)))
        elif how == "release":
            self.both(lambda b: b.release(ReleaseParams(token=token, now=now)))
        elif how in ("keep", "hold", "claim"):
            params = HeartbeatParams(
                tokens=[token], now=now, hold=HOLD if how == "hold" else None, claim=how == "claim"
            )
            self.both(lambda b: b.heartbeat(params))
        else:
            retry_at = {"retry-now": now, "retry-later": now + 4.0, "dead": None}[how]
            params_f = FailParams(token=token, now=now, error="boom", retry_at=retry_at)
            self.both(lambda b: b.fail(params_f))

    @rule(seconds=st.sampled_from([0.001, 0.5, 1.0, 2.5, 4.0, 9.0, 25.0]))
    def advance_clock(self, seconds: float) -> None:
        self.now += seconds

    @rule()
    def maintain(self) -> None:
        self.both(lambda b: b.maintain(MaintainParams(now=self.now)))

    @rule(
        tenant=st.sampled_from(TENANTS),
        weight=st.sampled_from([KEEP, None, 0.0, 0.5, 2.0]),
        cap=st.sampled_from([KEEP, None, 1]),
        rate=st.sampled_from([KEEP, *RATES]),
    )
    def set_tenant(self, tenant: str, weight: Any, cap: Any, rate: Any) -> None:
        params = TenantSettingsParams(
            queue="default", tenant=tenant, now=self.now, weight=weight, max_running=cap, rate=rate
        )
        self.both(lambda b: b.set_tenant(params))

    @initialize(
        rate=st.sampled_from(RATES),
        half_life=st.sampled_from([None, 20.0, 20.0]),
        max_debt=st.sampled_from([60.0, 2.0]),
    )
    def start_with_settings(
        self, rate: Rate | None, half_life: float | None, max_debt: float
    ) -> None:
        self.set_queue(rate, half_life, max_debt)

    @rule(
        rate=st.sampled_from(RATES),
        half_life=st.sampled_from([None, 20.0]),
        max_debt=st.sampled_from([60.0, 2.0]),
    )
    def set_queue(self, rate: Rate | None, half_life: float | None, max_debt: float) -> None:
        settings_ = QueueSettings(
            queue="default", rate=rate, half_life=half_life, max_debt=max_debt
        )
        self.both(lambda b: b.set_queue(SetQueueParams(settings=settings_, now=self.now)))
        self.both(lambda b: b.get_queue(GetQueueParams(queue="default")))

    @invariant()
    def both_agree(self) -> None:
        self.both(lambda b: b.stats(StatsParams(now=self.now)))
        self.both(lambda b: b.stats(StatsParams()))
        _, jobs = self.both(lambda b: b.get_jobs(GetJobsParams(ids=self.ids)))
        keys = [(kind, tenant) for kind in RULES for tenant in TENANTS]
        self.both(lambda b: b.throttle_windows(ThrottleWindowsParams(keys=keys, now=self.now)))
        self.both(lambda b: b.job_costs(JobCostsParams()))
        running = {j.id for j in jobs if j.state is JobState.RUNNING}
        self.live = [t for t in self.live if t.rsplit(":", 1)[0] in running]


def _outcome(call: Callable[[Backend], Any], backend: Backend) -> tuple[str, Any]:
    try:
        return ("ok", call(backend))
    except FairqError as exc:
        return ("raised", type(exc).__name__)


def test_sqlite_agrees_with_the_model_under_limits(tmp_path: Path) -> None:
    class Machine(LimitsAgree):
        directory = tmp_path

    Machine.TestCase.settings = settings(max_examples=60, stateful_step_count=50, deadline=None)
    Machine.TestCase().runTest()
