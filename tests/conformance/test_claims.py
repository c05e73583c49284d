"""A relayed job's run starts when a peer's worker claims it (DequeueParams.hold).

The relay hands jobs out *unclaimed*, each under a short hold it keeps alive; a worker's claim
starts the run under the job's own lease. The wait in the broker is not service: it is charged
the estimate and nothing more, and it teaches the learned cost nothing. A hold that lapses (the
relay died) gives the job back at once, the attempt not counted and the estimate refunded.
"""

from __future__ import annotations

import pytest

from fairq.contract import (
    Backend,
    CancelParams,
    CheckpointParams,
    DequeueParams,
    HeartbeatParams,
    JobCostsParams,
    MaintainParams,
    StatsParams,
)
from fairq.errors import ConfigError
from fairq.job import JobState, Lease

from .helpers import Q, ack, enqueue, job, new_job, new_jobs, stat, take_one

HOLD = 5.0


def relay_take(backend: Backend, now: float, limit: int = 1) -> list[Lease]:
    params = DequeueParams(queues=[Q], worker_id="relay", now=now, limit=limit, hold=HOLD)
    return list(backend.dequeue(params).leases)


def hold(backend: Backend, tokens: list[str], now: float, seconds: float = HOLD):  # type: ignore[no-untyped-def]
    return backend.heartbeat(HeartbeatParams(tokens=tokens, now=now, hold=seconds))


def claim(backend: Backend, tokens: list[str], now: float):  # type: ignore[no-untyped-def]
    return backend.heartbeat(HeartbeatParams(tokens=tokens, now=now, claim=True))


def test_an_unclaimed_lease_is_held_for_the_hold_and_kept_alive_without_charge(
    backend: Backend,
) -> None:
    enqueue(backend, [new_job(0, "a", lease=60.0)])
    (lease,) = relay_take(backend, 0.0)
    assert lease.deadline == HOLD
    assert job(backend, "j0").state is JobState.RUNNING
    usage = stat(backend, "a").usage
    for now in (4.0, 8.0, 12.0, 16.0, 20.0, 24.0):  # a long wait in the broker
        result = hold(backend, [lease.token], now)
        assert result.deadlines == {lease.token: now + HOLD} and not result.claimed
    assert stat(backend, "a").usage == usage  # charged its estimate, nothing more


def test_a_plain_heartbeat_or_checkpoint_of_an_unclaimed_lease_charges_nothing(
    backend: Backend,
) -> None:
    """Only a claim starts the run: a peer's heartbeat or checkpoint that comes without one
    (an older integration) extends the lease but does not charge the broker's wait."""
    enqueue(backend, [new_job(0, "a", lease=60.0), new_job(1, "a", lease=60.0)])
    first, second = relay_take(backend, 0.0, limit=2)
    usage = stat(backend, "a").usage
    backend.heartbeat(HeartbeatParams(tokens=[first.token], now=4.0))
    backend.checkpoint(
        CheckpointParams(token=second.token, progress='{"cursor":1,"items":1,"slices":0}', now=4.5)
    )
    assert stat(backend, "a").usage == usage
    assert (job(backend, "j0").deadline, job(backend, "j1").deadline) == (64.0, 64.5)


def test_a_claim_starts_the_run_under_the_jobs_own_lease_and_charges_only_the_run(
    backend: Backend,
) -> None:
    enqueue(backend, [new_job(0, "a", lease=60.0), new_job(1, "b", lease=60.0)])
    relayed, native = relay_take(backend, 0.0), take_one(backend, 0.0)
    (relayed,) = relayed
    hold(backend, [relayed.token], 3.0)
    result = claim(backend, [relayed.token], 7.0)  # it waited 7 s in the broker
    assert result.deadlines == {relayed.token: 67.0}
    ack(backend, relayed, 8.0)  # ran 1 s
    ack(backend, native, 1.0)  # ran 1 s
    rows = {r.tenant: r.usage for r in backend.stats(StatsParams(now=8.0))}
    assert rows["a"] == pytest.approx(rows["b"], rel=1e-9)  # the broker's 7 s is no service
    (learned,) = backend.job_costs(JobCostsParams())
    assert (learned.runs, learned.estimate) == (2, pytest.approx(1.0))


def test_a_second_claim_is_refused_and_said_so(backend: Backend) -> None:
    """A copy of a message delivered again while its job runs must not run too: its claim
    changes nothing and reports the lease claimed (a native job's lease counts as claimed)."""
    enqueue(backend, [new_job(0, "a", lease=60.0), new_job(1, "b", lease=60.0)])
    (relayed,) = relay_take(backend, 0.0)
    native = take_one(backend, 0.0)
    assert claim(backend, [relayed.token], 1.0).deadlines == {relayed.token: 61.0}
    again = claim(backend, [relayed.token, native.token], 2.0)
    assert list(again.claimed) == [relayed.token, native.token]
    assert not again.deadlines and not again.lost
    assert (job(backend, "j0").deadline, job(backend, "j1").deadline) == (61.0, 60.0)


def test_the_relays_hold_leaves_a_claimed_lease_alone_and_says_so(backend: Backend) -> None:
    enqueue(backend, [new_job(0, "a", lease=60.0)])
    (lease,) = relay_take(backend, 0.0)
    claim(backend, [lease.token], 1.0)
    result = hold(backend, [lease.token], 2.0)
    assert list(result.claimed) == [lease.token]
    assert lease.token not in result.deadlines and not result.lost
    assert job(backend, "j0").deadline == 61.0


def test_a_lapsed_hold_gives_the_job_back_at_once_with_the_attempt_not_counted(
    backend: Backend,
) -> None:
    enqueue(backend, [new_job(0, "a", lease=60.0, max_attempts=1)])
    before = stat(backend, "a").usage
    (lease,) = relay_take(backend, 0.0)
    assert stat(backend, "a").usage > before  # charged its estimate while it is out
    (expired,) = backend.maintain(MaintainParams(now=HOLD)).expired
    assert (expired.job_id, expired.claimed, expired.dead, expired.attempt) == (
        "j0",
        False,
        False,
        1,
    )
    assert claim(backend, [lease.token], HOLD).lost == [lease.token]  # the old message: skipped
    row = stat(backend, "a")
    assert (row.ready, row.running, row.failed) == (1, 0, 0)
    assert row.usage == before  # the estimate given back: it never ran
    again = take_one(backend, HOLD)  # its one attempt is still there
    assert (again.job_id, again.attempt) == ("j0", 1)


def test_the_relay_gives_back_what_no_worker_claimed_by_shortening_the_hold(
    backend: Backend,
) -> None:
    enqueue(backend, new_jobs("a", range(2), lease=60.0))
    first, second = relay_take(backend, 0.0, limit=2)
    claim(backend, [first.token], 1.0)
    result = hold(backend, [first.token, second.token], 2.0, seconds=0.001)  # the relay stops
    assert list(result.claimed) == [first.token]
    expired = backend.maintain(MaintainParams(now=2.001)).expired
    assert [(e.job_id, e.claimed) for e in expired] == [(second.job_id, False)]
    ack(backend, first, 3.0)  # the claimed one runs on


def test_a_cancel_asked_while_unclaimed_ends_the_job_cancelled_when_its_hold_lapses(
    backend: Backend,
) -> None:
    enqueue(backend, [new_job(0, "a", lease=60.0)])
    relay_take(backend, 0.0)
    backend.cancel(CancelParams(ids=["j0"], now=1.0))
    (expired,) = backend.maintain(MaintainParams(now=HOLD)).expired
    assert (expired.claimed, expired.cancelled) == (False, True)
    assert job(backend, "j0").state is JobState.CANCELLED
    row = stat(backend, "a")
    assert (row.ready, row.running, row.failed, row.cancelled) == (0, 0, 0, 1)


def test_hold_and_claim_are_checked() -> None:
    with pytest.raises(ConfigError, match="hold"):
        DequeueParams(queues=[Q], worker_id="r", now=0.0, hold=0.0)
    with pytest.raises(ConfigError, match="hold"):
        HeartbeatParams(tokens=[], now=0.0, hold=float("nan"))
    with pytest.raises(ConfigError, match="claims leases or holds them"):
        HeartbeatParams(tokens=[], now=0.0, hold=1.0, claim=True)
