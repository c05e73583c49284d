"""The relay: releases stored jobs into a peer's broker in fairq's fair order.

A relay is a worker whose "running a job" is publishing it. It takes jobs with the same
``dequeue`` as a native worker — weights, caps, rates, throttle rules and half-life decide the
order, in the store — and hands each to a ``Publisher`` (Celery, RQ, Dramatiq) with its lease's
ticket. The peer's worker claims that lease, keeps it alive and stores the outcome
(``fairq.relay.runs``); the relay never waits for jobs to finish.

A released job's run starts when a peer's worker claims it (``RelayedRuns.begin``), not when
the relay takes it: the relay's dequeue holds each job *unclaimed* for ``hold`` seconds (10 by
default), and ``Holds`` (holds.py) renews the holds of the jobs still waiting in the broker
every third of it. The wait in the broker is charged the job's estimate and nothing more. A
relay that dies leaves holds that lapse within seconds: those jobs are ready again (the attempt
not counted) and released anew; the broker's old copy is skipped when a worker takes it. A
relay that stops gives its unclaimed jobs back at once, and one whose job waited its whole
lease unclaimed (a lost message) gives that job back. Like a native worker, the relay calls
the App's ``tenant_weights`` callbacks of its queues (``weights``).

Backpressure is the queue's ``max_in_flight``: at most that many jobs of the queue are out
(released and not finished) across every relay, so the broker holds only those and a
newcomer tenant's first job waits behind them, not behind a flood. The relay sets it when it
starts (``in_flight``). When the queue is full the store's dequeue hands out nothing and the
relay blocks in the store's wait, which an ack that frees room ends at once: no planner
interval anywhere. A dequeue that took fewer jobs than asked goes straight to that wait.
Several relays may run at once: each job is leased to one of them. Where the publisher can
tell the broker's backlog of a queue (``Publisher.backlog_size`` and ``backlog_age``),
``max_backlog`` and ``max_backlog_age`` also hold the queue back while the broker is behind,
whoever sent its messages.

A broker that fails a publish gets the job handed back to fairq (ready at the next dequeue,
the attempt not counted; left to a worker that claimed it meanwhile) and the relay backs off
(0.1 s doubling to 5 s), logging once per outage. A job whose name the peer does not know
goes dead with that reason; the others carry on.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from fairq.app.declare import TenantWeights
from fairq.contract import (
    Backend,
    DequeueParams,
    ExpiredLease,
    FailParams,
    GetQueueParams,
    HeartbeatParams,
    SetQueueParams,
)
from fairq.errors import ConfigError, FairqError
from fairq.job import Lease
from fairq.policy.bounds import check_int, check_seconds
from fairq.policy.queues import check_queue_name
from fairq.relay.holds import GIVE_BACK, Holds
from fairq.worker.joblog import describe, job_fields
from fairq.worker.weights import WeightRefresher

log = logging.getLogger("fairq.relay")

#: The longest a relay blocks in one wait: how soon it sees a stop, and the lease expiries
#: that only its own dequeue's maintenance would find (a relay sees them within this).
IDLE_WAIT = 1.0
BACKOFF_FIRST = 0.1
BACKOFF_MOST = 5.0
#: A relayed queue's max_in_flight when neither the relay nor the store sets one: a relay
#: never runs a queue without backpressure.
DEFAULT_IN_FLIGHT = 10
#: Seconds a released job is held for a peer's worker to claim it, renewed every third of it
#: while it waits in the broker: how soon a dead relay's unclaimed jobs are ready again.
DEFAULT_HOLD = 10.0
#: The shortest hold: a renewal (one store call) must reliably land within a third of it.
MIN_HOLD = 1.0


class UnknownTask(FairqError, LookupError):
    """The peer has no task by the stored job's name (renamed, removed, not imported)."""


class Publisher(Protocol):
    """How one peer library receives a released job."""

    def publish(self, lease: Lease) -> None:
        """Send the job (``lease.payload``: its JSON arguments) to the broker with
        ``ticket_of(lease)``. Raise UnknownTask for a name the peer does not know; any other
        exception means the broker did not take it (the job goes back to fairq)."""

    def backlog_age(self, queue: str) -> float | None:
        """Seconds the oldest message of ``queue`` has waited in the broker; None: unknown."""

    def backlog_size(self, queue: str) -> int | None:
        """Messages of ``queue`` waiting in the broker for a worker; None: unknown."""


class Relay:
    """Releases the jobs of ``queues`` from ``backend`` through ``publisher``.

    ``in_flight``: the queues' ``max_in_flight``, set in the store when the relay starts (None:
    keep what the store has, DEFAULT_IN_FLIGHT where it has none). ``max_backlog_age``: also
    hold a queue back while the broker's oldest message of it is older than this;
    ``max_backlog``: while more than this many of its messages wait in the broker, whoever
    sent them (both for publishers that can tell; polled). ``hold``: seconds a released job
    waits for a worker's claim before it is ready again, were the relay to die (at least
    MIN_HOLD). ``weights``: the App's ``tenant_weights`` registrations (those of other queues
    are ignored).
    """

    def __init__(
        self,
        backend: Backend,
        publisher: Publisher,
        queues: Sequence[str],
        *,
        in_flight: int | None = None,
        batch: int = 100,
        max_backlog_age: float | None = None,
        max_backlog: int | None = None,
        clock: Callable[[], float] = time.time,
        name: str | None = None,
        hold: float = DEFAULT_HOLD,
        weights: Sequence[TenantWeights] = (),
    ) -> None:
        if isinstance(queues, str) or not queues:
            raise ConfigError(f"queues must be a non-empty list of queue names, got {queues!r}")
        self.queues = [check_queue_name(q) for q in queues]
        if in_flight is not None:
            check_int("in_flight", in_flight, least=1)
        self.backend = backend
        self.publisher = publisher
        self.in_flight = in_flight
        self.batch = check_int("batch", batch, least=1)
        if max_backlog_age is not None and not max_backlog_age > 0:
            raise ConfigError(f"max_backlog_age must be > 0 seconds, got {max_backlog_age!r}")
        self.max_backlog_age = max_backlog_age
        self.max_backlog = (
            None if max_backlog is None else check_int("max_backlog", max_backlog, least=0)
        )
        self.clock = clock
        self.hold = check_seconds("hold", hold)
        if self.hold < MIN_HOLD:
            raise ConfigError(
                f"hold must be at least {MIN_HOLD:g} s (the relay renews it every third of it), "
                f"got {hold!r}"
            )
        relayed = set(self.queues)
        self.weights = WeightRefresher(
            backend, [w for w in weights if w.queue in relayed], clock=clock
        )
        self.name = name or f"relay-{uuid.uuid4().hex[:12]}"
        self.released = 0
        self.started = threading.Event()
        self._stop = threading.Event()
        self._turn = 0
        self._outage: float | None = None  # monotonic start of the broker outage under way
        self._delay = BACKOFF_FIRST
        self.holds = Holds(backend, self.hold, clock=clock, name=self.name)

    def stop(self) -> None:
        """Ask ``run`` to return (within IDLE_WAIT); nothing is lost either way."""
        self._stop.set()

    def run(self) -> None:
        """Release jobs until ``stop``."""
        self._set_in_flight()
        log.info(
            "relay %s releasing queues %s (in flight per queue: %s)",
            self.name,
            ", ".join(self.queues),
            self.in_flight if self.in_flight is not None else "as stored",
        )
        self.weights.start()
        self.started.set()
        try:
            self._release_until_stopped()
        finally:
            self.weights.stop()
            self.holds.stop()
            self.holds.give_back()
        log.info("relay %s stopped after releasing %d jobs", self.name, self.released)

    def _release_until_stopped(self) -> None:
        idle = False
        while not self._stop.is_set():
            queues = self._open_queues()
            if not queues:
                self._stop.wait(0.1)  # every queue's broker backlog is too long: look again soon
                continue
            try:
                result = self.backend.dequeue(
                    DequeueParams(
                        queues=queues,
                        worker_id=self.name,
                        now=self.clock(),
                        limit=self.batch,
                        wait=IDLE_WAIT if idle else 0.0,
                        hold=self.hold,
                    )
                )
            except Exception as exc:  # the store is down: jobs are safe there; try again
                log.error("relay %s: the store failed: %s; retrying", self.name, describe(exc))
                self._stop.wait(self._delay)
                self._delay = min(self._delay * 2, BACKOFF_MOST)
                continue
            for expired in result.expired:
                _log_expired(expired)
            self.holds.add(result.leases)
            # Fewer than asked: nothing more is ready, or the queues are full. Either way the
            # next job comes with a wake-up (an enqueue, an ack that frees room), so wait for it
            # rather than ask again at once (which found nothing: a store call per release).
            idle = len(result.leases) < self.batch
            self._publish_all(result.leases)

    # -- steps -------------------------------------------------------------------------------

    def _set_in_flight(self) -> None:
        for queue in self.queues:
            settings = self.backend.get_queue(GetQueueParams(queue=queue))
            wanted = self.in_flight or settings.max_in_flight or DEFAULT_IN_FLIGHT
            if settings.max_in_flight != wanted:
                # Only the cap: another setting changed meanwhile (fairq queue) stands.
                changed = replace(settings, max_in_flight=wanted)
                self.backend.set_queue(
                    SetQueueParams.changing(changed, self.clock(), ["max_in_flight"])
                )

    def _open_queues(self) -> list[str]:
        """The queues to release from now, the first one turning each round so one busy queue
        is not always asked first; with ``max_backlog_age`` or ``max_backlog``, only those
        whose broker keeps up (a backlog the broker cannot tell holds nothing back)."""
        self._turn = (self._turn + 1) % len(self.queues)
        order = self.queues[self._turn :] + self.queues[: self._turn]
        if self.max_backlog_age is not None:
            most_age = self.max_backlog_age
            order = [q for q in order if (self.publisher.backlog_age(q) or 0.0) <= most_age]
        if self.max_backlog is not None:
            most = self.max_backlog
            order = [q for q in order if (self.publisher.backlog_size(q) or 0) <= most]
        return order

    def _publish_all(self, leases: Sequence[Lease]) -> None:
        for i, lease in enumerate(leases):
            if not self._publish(lease):
                self._hand_back(leases[i:])
                self._stop.wait(self._delay)
                self._delay = min(self._delay * 2, BACKOFF_MOST)
                return

    def _publish(self, lease: Lease) -> bool:
        """Publish one job; False when the broker failed (the caller hands the job back)."""
        try:
            self.publisher.publish(lease)
        except UnknownTask as exc:
            self._bury(lease, exc)
            return True
        except Exception as exc:
            if self._outage is None:
                self._outage = time.monotonic()
                log.error(
                    "relay %s: the broker did not take job %s (%s); jobs stay in fairq and the "
                    "relay retries with back-off (logged once per outage)",
                    self.name,
                    lease.job_id,
                    describe(exc),
                    extra=job_fields(lease, "broker_down"),
                )
            return False
        if self._outage is not None:
            log.warning(
                "relay %s: the broker takes jobs again after %.1f s",
                self.name,
                time.monotonic() - self._outage,
            )
            self._outage = None
            self._delay = BACKOFF_FIRST
        self.released += 1
        log.debug("released job %s", lease.job_id, extra=job_fields(lease, "released"))
        return True

    def _bury(self, lease: Lease, exc: UnknownTask) -> None:
        """A job the peer cannot run: dead now, with the reason (retrying cannot help)."""
        reason = f"cannot relay: {exc}"
        self.holds.drop(lease)
        log.error(
            "job %s %s: %s", lease.job_id, lease.name, reason, extra=job_fields(lease, "dead")
        )
        params = FailParams(token=lease.token, now=self.clock(), error=reason, retry_at=None)
        try:
            self.backend.fail(params)
        except Exception as error:  # the store is down: its hold lapses, it is tried again
            log.error(
                "job %s: could not store it dead (%s); it is tried again once its hold lapses",
                lease.job_id,
                describe(error),
                extra=job_fields(lease, "bury_failed"),
            )

    def _hand_back(self, leases: Sequence[Lease]) -> None:
        """Give jobs the broker did not take back to fairq: their holds are cut short, so each
        is ready again at the next dequeue (the attempt not counted). A job a worker claimed
        meanwhile is left to it, never made ready while it runs: a publish can fail after the
        broker took the message (a connection lost before its confirm). Should the store be
        down too, the holds lapse all the same."""
        for lease in leases:
            self.holds.drop(lease)
        tokens = [lease.token for lease in leases]
        params = HeartbeatParams(tokens=tokens, now=self.clock(), hold=GIVE_BACK)
        try:
            self.backend.heartbeat(params)
        except Exception as exc:
            log.error(
                "relay %s: could not hand %d jobs back (%s); they are ready again once their "
                "holds lapse",
                self.name,
                len(leases),
                describe(exc),
            )


def _log_expired(expired: ExpiredLease) -> None:
    """Say what the store did with a lease that ran out (found by this relay's dequeue)."""
    if expired.cancelled:
        then = "it had a cancel request: it is cancelled now"
    elif not expired.claimed:
        then = "it is ready again (the attempt not counted)"
    elif expired.dead:
        then = "that was its last attempt: it is dead now"
    else:
        then = "it is ready again"
    if not expired.claimed:
        log.info(
            "job %s %s of tenant %r: no worker claimed it before its relay's hold lapsed (the "
            "relay died, stopped or gave it back); %s",
            expired.job_id,
            expired.name,
            expired.tenant,
            then,
            extra=_expired_fields(expired, "hold_lapsed"),
        )
        return
    log.warning(
        "job %s %s of tenant %r: its lease expired before the peer reported its end (the "
        "peer's worker died, hung or lost the store); %s",
        expired.job_id,
        expired.name,
        expired.tenant,
        then,
        extra=_expired_fields(expired, "lease_expired"),
    )


def _expired_fields(expired: ExpiredLease, action: str) -> dict[str, object]:
    return {
        "action": action,
        "job_id": expired.job_id,
        "job_name": expired.name,
        "tenant": expired.tenant,
        "queue": expired.queue,
        "attempt": expired.attempt,
    }
