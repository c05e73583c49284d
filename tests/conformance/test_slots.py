"""Tenant slots: a guard in a peer broker's worker runs a job only while its tenant holds one of
its slots in the queue. Leased (an expired slot is free), capped by ``limit`` or the tenant's
``max_running`` setting, given back by release (fairq/policy/slots.py)."""

from __future__ import annotations

import pytest

from fairq.contract import (
    AcquireSlotParams,
    Backend,
    LeaveLineParams,
    MaintainParams,
    QueueSettings,
    ReleaseSlotsParams,
    RenewSlotsParams,
    SetQueueParams,
    SlotResult,
    StatsParams,
)
from fairq.errors import ConfigError, InvalidTenant

from .helpers import Q, set_tenant

LEASE = 30.0


def acquire(
    backend: Backend,
    tenant: str = "a",
    now: float = 0.0,
    *,
    limit: int | None = None,
    queue: str = Q,
    lease: float = LEASE,
) -> SlotResult:
    return backend.acquire_slot(
        AcquireSlotParams(
            queue=queue, tenant=tenant, holder="w1", lease=lease, now=now, limit=limit
        )
    )


def granted(backend: Backend, count: int, tenant: str = "a", now: float = 0.0, **kw: object) -> int:
    """How many of ``count`` acquires at ``now`` were granted."""
    return sum(acquire(backend, tenant, now, **kw).granted for _ in range(count))  # type: ignore[arg-type]


def token(result: SlotResult) -> str:
    assert result.token is not None, f"refused: {result}"
    return result.token


def test_a_granted_slot_has_a_token_and_a_deadline(backend: Backend) -> None:
    result = acquire(backend, now=5.0, limit=1)
    assert result.granted and result.token
    assert (result.deadline, result.free_at) == (5.0 + LEASE, None)
    assert backend.stats(StatsParams()) == []  # no tenant or queue is made for a slot


def test_the_cap_is_respected_and_a_refusal_says_when_a_slot_frees(backend: Backend) -> None:
    first = acquire(backend, now=0.0, limit=2)
    second = acquire(backend, now=1.0, limit=2)
    assert first.granted and second.granted
    refused = acquire(backend, now=2.0, limit=2)
    assert refused == SlotResult(token=None, deadline=None, free_at=LEASE)  # first's deadline
    assert not refused.granted


def test_release_frees_a_slot(backend: Backend) -> None:
    held = token(acquire(backend, limit=1))
    assert not acquire(backend, now=1.0, limit=1).granted
    result = backend.release_slots(ReleaseSlotsParams(tokens=[held], now=2.0))
    assert (list(result.released), list(result.lost)) == ([held], [])
    assert acquire(backend, now=3.0, limit=1).granted


def test_an_expired_slot_is_free_at_its_deadline(backend: Backend) -> None:
    acquire(backend, now=0.0, limit=1)
    assert acquire(backend, now=LEASE - 0.5, limit=1).free_at == LEASE
    again = acquire(backend, now=LEASE, limit=1)  # deadline <= now: expired
    assert again.granted and again.deadline == 2 * LEASE


def test_renew_keeps_a_slot_past_its_first_deadline(backend: Backend) -> None:
    held = token(acquire(backend, now=0.0, limit=1))
    renewed = backend.renew_slots(RenewSlotsParams(tokens=[held], now=20.0))
    assert (dict(renewed.deadlines), list(renewed.lost)) == ({held: 20.0 + LEASE}, [])
    refused = acquire(backend, now=LEASE + 1, limit=1)
    assert refused.free_at == 20.0 + LEASE
    assert acquire(backend, now=20.0 + LEASE, limit=1).granted


def test_each_slot_keeps_its_own_lease(backend: Backend) -> None:
    short = token(acquire(backend, now=0.0, lease=10.0))
    long = token(acquire(backend, now=0.0, lease=100.0))
    renewed = backend.renew_slots(RenewSlotsParams(tokens=[long, short], now=5.0))
    assert dict(renewed.deadlines) == {long: 105.0, short: 15.0}


def test_the_cap_is_the_tenants_max_running_setting_changed_at_run_time(
    backend: Backend,
) -> None:
    assert granted(backend, 20) == 20  # no setting and no limit: no cap
    set_tenant(backend, "b", max_running=1)
    assert granted(backend, 3, "b") == 1
    set_tenant(backend, "b", max_running=3, now=1.0)
    assert granted(backend, 3, "b", now=1.0) == 2  # one was held already
    set_tenant(backend, "b", max_running=1, now=2.0)
    assert granted(backend, 1, "b", now=2.0) == 0  # 3 held, over the new cap: none given


def test_the_queue_default_caps_tenants_without_their_own(backend: Backend) -> None:
    settings = QueueSettings(queue=Q, max_running=2)
    backend.set_queue(SetQueueParams(settings=settings, now=0.0))
    set_tenant(backend, "own", max_running=4)
    assert granted(backend, 5, "new") == 2  # a tenant the store has never seen
    assert granted(backend, 5, "own") == 4
    set_tenant(backend, "own", max_running=None, now=1.0)  # back to the queue's default
    assert granted(backend, 1, "own", now=1.0) == 0
    backend.set_queue(SetQueueParams(settings=QueueSettings(queue=Q), now=2.0))
    assert granted(backend, 5, "new", now=2.0) == 5


def test_an_explicit_limit_overrides_the_setting(backend: Backend) -> None:
    set_tenant(backend, "a", max_running=1)
    assert granted(backend, 5, limit=3) == 3
    assert granted(backend, 1) == 0  # the setting: 3 held >= 1
    set_tenant(backend, "b", max_running=10)
    assert granted(backend, 5, "b", limit=1) == 1


def test_an_int_tenant_is_its_decimal_text(backend: Backend) -> None:
    set_tenant(backend, "7", max_running=1)
    assert granted(backend, 2, 7) == 1  # type: ignore[arg-type]
    assert granted(backend, 1, "7") == 0


def test_tenants_are_independent(backend: Backend) -> None:
    assert granted(backend, 3, "a", limit=1) == 1
    assert granted(backend, 3, "b", limit=2) == 2
    assert granted(backend, 1, "a:b", limit=1) == 1  # ids that look alike do not share


def test_queues_are_independent(backend: Backend) -> None:
    assert granted(backend, 2, limit=1) == 1
    assert granted(backend, 2, limit=1, queue="other") == 1
    set_tenant(backend, "a", max_running=1, queue="capped")
    assert granted(backend, 3, queue="capped") == 1
    assert granted(backend, 3, queue="free") == 3


def test_lost_tokens_are_reported_and_change_nothing(backend: Backend) -> None:
    kept = token(acquire(backend, now=0.0))
    gone = token(acquire(backend, now=0.0))
    brief = token(acquire(backend, now=0.0, lease=5.0))
    backend.release_slots(ReleaseSlotsParams(tokens=[gone], now=1.0))
    unknown = ["", "nonsense", f"{Q}:{'0' * 32}:a", kept.replace(f"{Q}:", "other:", 1)]
    renewed = backend.renew_slots(RenewSlotsParams(tokens=[gone, brief, *unknown, kept], now=6.0))
    assert dict(renewed.deadlines) == {kept: 6.0 + LEASE}
    assert list(renewed.lost) == [gone, brief, *unknown]
    released = backend.release_slots(ReleaseSlotsParams(tokens=[kept, kept, brief], now=7.0))
    assert (list(released.released), list(released.lost)) == ([kept], [kept, brief])


def test_a_token_names_its_own_tenant_only(backend: Backend) -> None:
    held = token(acquire(backend, "a", limit=1))
    queue, nonce, _ = held.split(":", 2)
    forged = f"{queue}:{nonce}:b"
    assert list(backend.release_slots(ReleaseSlotsParams(tokens=[forged], now=1.0)).lost) == [
        forged
    ]
    assert not acquire(backend, "a", now=1.0, limit=1).granted


def test_maintenance_leaves_held_slots_alone(backend: Backend) -> None:
    held = token(acquire(backend, now=0.0, limit=1))
    brief = token(acquire(backend, "b", now=0.0, lease=1.0))
    backend.maintain(MaintainParams(now=10.0))
    assert list(backend.renew_slots(RenewSlotsParams(tokens=[held, brief], now=11.0)).lost) == [
        brief
    ]
    assert not acquire(backend, now=12.0, limit=1).granted


@pytest.mark.parametrize(
    ("change", "error", "named"),
    [
        ({"limit": 0}, ConfigError, "limit"),
        ({"limit": -1}, ConfigError, "limit"),
        ({"limit": 2.0}, ConfigError, "limit"),
        ({"lease": 0.0}, ConfigError, "lease"),
        ({"lease": -5.0}, ConfigError, "lease"),
        ({"lease": float("nan")}, ConfigError, "lease"),
        ({"tenant": ""}, InvalidTenant, "tenant"),
        ({"tenant": "a\x00b"}, InvalidTenant, "tenant"),
        ({"tenant": None}, InvalidTenant, "tenant"),
        ({"queue": "no spaces"}, ConfigError, "queue"),
        ({"holder": ""}, ConfigError, "holder"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(
    backend: Backend, change: dict[str, object], error: type[Exception], named: str
) -> None:
    args: dict[str, object] = {
        "queue": Q, "tenant": "a", "holder": "w1", "lease": LEASE, "now": 0.0, "limit": 1,
    }  # fmt: skip
    with pytest.raises(error, match=named):
        backend.acquire_slot(AcquireSlotParams(**{**args, **change}))  # type: ignore[arg-type]
    assert acquire(backend, limit=1).granted  # nothing was taken


THREADS, CAP, ROUNDS = 8, 3, 6


def handles(backend: Backend, count: int) -> list[Backend]:
    """``count`` handles on the store under test, for threads to race on. A SQLite backend
    object takes its threads in turn on its one connection, so each thread gets its own
    (its own connection to the same file); Redis and PostgreSQL serve threads from a pool."""
    from fairq.backends.clock import Clock
    from fairq.backends.sqlite import SQLiteBackend

    if isinstance(backend, SQLiteBackend):
        return [SQLiteBackend(backend.path, clock=Clock.CALLER) for _ in range(count)]
    return [backend] * count


def test_racing_acquires_never_grant_more_than_the_cap(backend: Backend) -> None:
    import threading

    racers = handles(backend, THREADS)
    start = threading.Barrier(THREADS + 1)
    done = threading.Barrier(THREADS + 1)
    results: list[list[SlotResult]] = [[] for _ in range(ROUNDS)]
    errors: list[BaseException] = []
    guard = threading.Lock()

    def race(store: Backend) -> None:
        for round_ in range(ROUNDS):
            start.wait()
            try:
                result = acquire(store, "a", float(round_), limit=CAP)
                with guard:
                    results[round_].append(result)
            except BaseException as exc:  # reported below, so the barriers still meet
                errors.append(exc)
            done.wait()

    threads = [threading.Thread(target=race, args=(store,)) for store in racers]
    for thread in threads:
        thread.start()
    try:
        for round_ in range(ROUNDS):
            start.wait(timeout=60)
            done.wait(timeout=60)
            tokens = [r.token for r in results[round_] if r.token is not None]
            assert len(tokens) == CAP, (round_, results[round_])
            assert len(set(tokens)) == CAP
            release = ReleaseSlotsParams(tokens=tokens, now=float(round_) + 0.5)
            assert len(backend.release_slots(release).released) == CAP
    finally:
        for thread in threads:
            thread.join(timeout=60)
        for store in racers:
            if store is not backend:
                store.close()
    assert not errors


def park(backend: Backend, text: str, now: float, waiter: str | None = None) -> SlotResult:
    """An acquire at cap 1 that parks the job ``text`` when refused."""
    return backend.acquire_slot(
        AcquireSlotParams(
            queue=Q, tenant="a", holder="w1", lease=LEASE, now=now, limit=1,
            waiter=waiter, park=text,
        )
    )  # fmt: skip


def test_a_release_wakes_the_oldest_parked_job_once(backend: Backend) -> None:
    held = token(acquire(backend, now=0.0, limit=1))
    first, second = park(backend, "job-1", 1.0), park(backend, "job-2", 2.0)
    assert first.waiter and second.waiter and first.waiter != second.waiter
    assert (first.token, first.gone, first.free_at) == (None, False, LEASE)
    text = 'job-3: {"args": [1]}'  # any text, colons too
    park(backend, text, 2.5)
    released = backend.release_slots(ReleaseSlotsParams(tokens=[held], now=3.0))
    assert (list(released.released), [w.park for w in released.wake]) == ([held], ["job-1"])
    again = token(acquire(backend, now=3.5, limit=1))  # a new job took the freed slot first
    woken = backend.release_slots(ReleaseSlotsParams(tokens=[again], now=4.0))
    assert list(woken.wake) == [(second.waiter, "job-2")]  # job-1 is woken already
    third = token(acquire(backend, now=4.2, limit=1))
    assert [
        w.park for w in backend.release_slots(ReleaseSlotsParams(tokens=[third], now=4.5)).wake
    ] == [text]
    fourth = token(acquire(backend, now=4.6, limit=1))
    assert list(backend.release_slots(ReleaseSlotsParams(tokens=[fourth], now=5.0)).wake) == []


def test_a_parked_job_runs_once_whichever_copy_comes_first(backend: Backend) -> None:
    held = token(acquire(backend, now=0.0, limit=1))
    place = park(backend, "job-1", 1.0).waiter
    assert place is not None
    backend.release_slots(ReleaseSlotsParams(tokens=[held], now=2.0))
    woken = park(backend, "job-1", 3.0, waiter=place)  # the woken copy takes the slot
    assert woken.granted and not woken.gone
    timed = park(backend, "job-1", 4.0, waiter=place)  # the timed copy, later: dropped
    assert (timed.gone, timed.granted, timed.waiter) == (True, False, None)
    backend.release_slots(ReleaseSlotsParams(tokens=[token(woken)], now=5.0))
    assert park(backend, "job-1", 6.0, waiter=place).gone  # even with a slot free


def test_a_refused_copy_keeps_its_place_and_can_be_woken_again(backend: Backend) -> None:
    held = token(acquire(backend, now=0.0, limit=1))
    older = park(backend, "job-1", 1.0).waiter
    park(backend, "job-2", 2.0)
    released = backend.release_slots(ReleaseSlotsParams(tokens=[held], now=3.0))
    assert list(released.wake) == [(older, "job-1")]
    other = token(acquire(backend, now=3.1, limit=1))  # a new job wins the race for the slot
    again = park(backend, "job-1 again", 3.2, waiter=older)  # the woken copy is refused
    assert (again.granted, again.gone, again.waiter) == (False, False, older)
    freed = backend.release_slots(ReleaseSlotsParams(tokens=[other], now=4.0))
    assert list(freed.wake) == [(older, "job-1 again")]  # first in line still, with its new text


def leave(backend: Backend, place: str, tenant: str = "a") -> bool:
    return backend.leave_line(LeaveLineParams(queue=Q, tenant=tenant, waiter=place))


def test_a_job_that_left_its_line_is_not_woken_and_its_copies_are_gone(backend: Backend) -> None:
    held = token(acquire(backend, now=0.0, limit=1))
    place, other = park(backend, "job-1", 1.0).waiter, park(backend, "job-2", 2.0).waiter
    assert place is not None and other is not None
    assert not leave(backend, place, tenant="b")  # a place names its own (queue, tenant)
    assert leave(backend, place)
    assert not leave(backend, place)  # once
    released = backend.release_slots(ReleaseSlotsParams(tokens=[held], now=3.0))
    assert list(released.wake) == [(other, "job-2")]
    assert park(backend, "job-1", 4.0, waiter=place).gone  # its timed or woken copy: dropped


def test_a_woken_job_leaves_its_line_until_a_copy_takes_a_slot(backend: Backend) -> None:
    held = token(acquire(backend, now=0.0, limit=1))
    place = park(backend, "job-1", 1.0).waiter
    assert place is not None
    backend.release_slots(ReleaseSlotsParams(tokens=[held], now=2.0))  # woken, still parked
    assert leave(backend, place)
    assert park(backend, "job-1", 3.0, waiter=place).gone  # the woken copy does not run
    again = park(backend, "job-2", 3.5)
    assert again.granted
    second = park(backend, "job-3", 4.0).waiter
    assert second is not None
    backend.release_slots(ReleaseSlotsParams(tokens=[token(again)], now=5.0))
    assert park(backend, "job-3", 6.0, waiter=second).granted  # the copy took the slot
    assert not leave(backend, second)  # too late: the job runs, its requeue must be dropped


def test_an_acquire_without_park_text_parks_nothing(backend: Backend) -> None:
    held = token(acquire(backend, now=0.0, limit=1))
    assert acquire(backend, now=1.0, limit=1).waiter is None
    assert list(backend.release_slots(ReleaseSlotsParams(tokens=[held], now=2.0)).wake) == []


def test_a_waiter_must_be_a_place_and_park_text_not_empty(backend: Backend) -> None:
    with pytest.raises(ConfigError, match="waiter"):
        park(backend, "job", 0.0, waiter="nope")
    with pytest.raises(ConfigError, match="park"):
        park(backend, "", 0.0)
    with pytest.raises(ConfigError, match="waiter"):
        leave(backend, "nope")
