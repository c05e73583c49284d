"""The relay's holds on every server store (issue #28): what it released and no worker claimed
is kept while it waits in the broker, given back when the relay stops, when the broker does not
take it, or when no worker claimed it within its lease; a dead relay's holds lapse."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from fairq import App
from fairq.contract import ExpiredLease, MaintainParams
from fairq.errors import ConfigError
from fairq.job import JobState
from fairq.relay import Relay, RelayedRuns, ticket_of
from fairq.relay.holds import GIVE_BACK

from .conftest import Peer, start_relay
from .test_relay_core import wait_until

HOLD = 1.0  # the shortest a relay takes: renewed every third of a second


def declare(app: App, lease: float = 60.0) -> None:
    @app.job(name="work", queue="relayed", tenant="tenant", lease=lease)
    def work(tenant: str, n: int) -> None:
        pass


def state(app: App, job_id: str) -> JobState | None:
    info = app.job_info(job_id)
    return None if info is None else info.state


def test_a_job_waiting_in_the_broker_stays_held_past_the_hold(app: App) -> None:
    """No worker takes it: the relay renews its hold (1 s) again and again, and it is released
    once, whatever the wait."""
    declare(app)
    job_id = app.jobs["work"].enqueue("t", 1)
    peer = Peer(app, slots=0)  # a broker nobody consumes
    relay = start_relay(app, peer, ["relayed"], hold=HOLD)
    try:
        wait_until(lambda: peer.published == 1, "the job released")
        first = app.job_info(job_id)
        assert first is not None and first.deadline is not None
        held_until = lambda: app.job_info(job_id).deadline or 0.0  # type: ignore[union-attr]  # noqa: E731
        wait_until(lambda: held_until() > first.deadline + 3 * HOLD, "three holds renewed")
        assert state(app, job_id) is JobState.RUNNING and peer.published == 1
    finally:
        relay.stop()
        peer.close()


def test_a_stopping_relay_gives_back_what_no_worker_claimed(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    declare(app)
    ids = [app.jobs["work"].enqueue("t", n) for n in range(3)]
    peer = Peer(app, slots=0)
    relay = start_relay(app, peer, ["relayed"], in_flight=3)
    wait_until(lambda: peer.published == 3, "three jobs released")
    claimed = peer.runs.begin(ticket_of(peer.broker.get()))  # a worker took one of them
    assert claimed is not None
    with caplog.at_level(logging.INFO, logger="fairq.relay"):
        relay.stop()
    stopped = time.time()
    assert "gave back 2 released jobs no worker had claimed" in caplog.text
    given_back = [i for i in ids if i != claimed.lease.job_id]
    for job_id in given_back:  # held no longer than the stop: not for the rest of the hold
        info = app.job_info(job_id)
        assert info is not None and info.deadline is not None
        assert info.deadline <= stopped + GIVE_BACK
    expired: list[ExpiredLease] = []
    wait_until(
        lambda: (
            expired.extend(app.backend.maintain(MaintainParams(now=app.clock())).expired)
            or len(expired) == 2
        ),
        "the jobs given back to be ready",
    )
    assert sorted(e.job_id for e in expired) == sorted(given_back)
    assert all(not e.claimed for e in expired)
    claimed.succeeded()  # the claimed one runs on to its end
    assert state(app, claimed.lease.job_id) is JobState.SUCCEEDED
    peer.close()


def test_a_stale_copy_is_skipped_and_said_so(app: App, caplog: pytest.LogCaptureFixture) -> None:
    """A job given back (its relay stopped) and released again: the older message is skipped
    (the job was handed out again, still its first attempt), the newer one runs, and its run
    starts at the claim."""
    declare(app)
    job_id = app.jobs["work"].enqueue("t", 1)
    peer = Peer(app, slots=0)
    first = start_relay(app, peer, ["relayed"], in_flight=1)
    wait_until(lambda: peer.published == 1, "the job released")
    first.stop()
    second = start_relay(app, peer, ["relayed"], in_flight=1)
    runs = RelayedRuns(app)
    try:
        wait_until(lambda: peer.published == 2, "the job released again")
        stale, fresh = peer.released
        with caplog.at_level(logging.INFO, logger="fairq.relay"):
            assert runs.begin(ticket_of(stale)) is None
        assert "handed out again (still attempt 1)" in caplog.text
        run = runs.begin(ticket_of(fresh))
        assert run is not None and run.lease.started_at > fresh.started_at  # at the claim
        info = app.job_info(job_id)
        assert info is not None and abs(info.started_at - run.lease.started_at) < 1e-3  # type: ignore[operator]
        run.succeeded()
    finally:
        second.stop()
        runs.close()
        peer.close()
    assert state(app, job_id) is JobState.SUCCEEDED


def test_a_copy_delivered_again_while_its_job_runs_does_not_run_it_twice(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    """A broker may deliver a message again while its job still runs (a visibility timeout, a
    connection lost before the peer acked it): the second claim of the same lease is refused,
    so the copy is skipped and said so; the job's own run ends it."""
    declare(app)
    job_id = app.jobs["work"].enqueue("t", 1)
    peer = Peer(app, slots=0)
    relay = start_relay(app, peer, ["relayed"], in_flight=1)
    runs = RelayedRuns(app)
    try:
        wait_until(lambda: peer.published == 1, "the job released")
        (message,) = peer.released
        run = runs.begin(ticket_of(message))
        assert run is not None
        with caplog.at_level(logging.WARNING, logger="fairq.relay"):
            assert runs.begin(ticket_of(message)) is None  # the same message, delivered again
        assert "another copy of its message is running it" in caplog.text
        run.succeeded()
    finally:
        relay.stop()
        runs.close()
        peer.close()
    assert state(app, job_id) is JobState.SUCCEEDED


def test_a_message_the_broker_lost_is_released_again_after_its_lease(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    """The broker took the job but lost it (or a worker took it and died before starting it):
    no worker will ever claim it, so the relay keeps it held no longer than the job's lease
    (1 s), then gives it back; it is released again and runs once."""
    declare(app, lease=1.0)
    job_id = app.jobs["work"].enqueue("t", 1)
    lost = threading.Event()
    peer = Peer(app, slots=1)
    publish = peer.publish

    def lose_the_first(lease):  # type: ignore[no-untyped-def]
        if not lost.is_set():
            lost.set()
            return  # taken, and never delivered
        publish(lease)

    peer.publish = lose_the_first  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="fairq.relay"):
        relay = start_relay(app, peer, ["relayed"], in_flight=1, hold=HOLD)
        try:
            wait_until(lambda: state(app, job_id) is JobState.SUCCEEDED, "the job run")
        finally:
            relay.stop()
            peer.close()
    assert "no worker claimed it within its lease (1 s) of its release" in caplog.text
    assert [lease.job_id for lease in peer.started] == [job_id]
    info = app.job_info(job_id)
    assert info is not None and info.attempts == 1  # given back: the attempt not counted


def test_a_broker_outage_leaves_the_relay_holding_nothing_it_handed_back(app: App) -> None:
    declare(app)
    ids = [app.jobs["work"].enqueue("t", n) for n in range(4)]
    down = threading.Event()
    down.set()
    peer = Peer(app, slots=2, broken=lambda lease: down.is_set())
    relay = start_relay(app, peer, ["relayed"], in_flight=4, hold=HOLD)
    try:
        # After a few hand-backs, between two tries (a try holds its jobs from its dequeue to
        # its hand-back): the jobs are back in fairq, not held.
        wait_until(
            lambda: relay.relay._delay > 0.4 and len(relay.relay.holds) == 0,
            "a few hand-backs, and nothing held between tries",
        )
        down.clear()
        wait_until(lambda: all(state(app, i) is JobState.SUCCEEDED for i in ids), "every job")
    finally:
        relay.stop()
        peer.close()
    assert sorted(lease.job_id for lease in peer.started) == sorted(ids)


def test_an_unclaimed_job_cancelled_meanwhile_ends_cancelled_when_given_back(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    declare(app)
    job_id = app.jobs["work"].enqueue("t", 1)
    peer = Peer(app, slots=0)
    first = start_relay(app, peer, ["relayed"], in_flight=1)
    wait_until(lambda: peer.published == 1, "the job released")
    app.cancel(job_id)
    first.stop()
    with caplog.at_level(logging.INFO, logger="fairq.relay"):
        second = start_relay(app, peer, ["relayed"], in_flight=1)
        try:
            wait_until(lambda: state(app, job_id) is JobState.CANCELLED, "the job cancelled")
        finally:
            second.stop()
            peer.close()
    assert "gave it back); it had a cancel request: it is cancelled now" in caplog.text


@pytest.mark.parametrize("hold", [0.5, 0.0, float("nan"), -1.0])
def test_a_hold_under_a_second_is_refused(app: App, hold: float) -> None:
    with pytest.raises(ConfigError, match="hold must be"):
        Relay(app.backend, Peer(app, slots=0), ["relayed"], hold=hold)
