"""The fetch loop: take as many jobs as there are free slots, in one call, without spinning.

It is the only thread that stores acks (``completions``). With a free slot, or every slot held
by a job that succeeded and waits for its ack, or the oldest such ack waiting ``ACK_WAIT``, one
``ack_and_dequeue`` stores the acks waiting and asks for every slot that frees (a plain
``dequeue`` when there is no ack), trying the queues in the order the ``QueueOrder`` gives for
this round. Otherwise it sleeps until one of those. With nothing ready, it asks the store when
something next falls due (a delayed job, a retry, a lease to expire), then dequeues with a wait
for new work (``DequeueParams.wait``) at most that long, and never longer than ``idle_wait``.
That wait runs on a job thread, which runs the first ``def`` job it brings itself (the fastest
way from a new job's arrival to its first line); meanwhile this thread stores the acks that
fall due, alone (``ack_many``).

The loop runs on its own thread so that stopping never waits for a wait to time out:
``close()`` only waits for a dequeue in progress (and the start of its jobs), after which no
job is ever started again; the thread notices the stop when its wait ends (a wait under way
hands back what it took), then stores acks until shutdown seals them (``RunningJobs.seal``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from fairq.contract import (
    AckAndDequeueParams,
    AckManyParams,
    AckManyResult,
    Backend,
    DequeueParams,
    DequeueResult,
    MaintainParams,
    ReleaseParams,
    StatsParams,
)
from fairq.instrument.hooks import Hooks, default_hooks
from fairq.job import Lease
from fairq.policy.queues import QueueOrder
from fairq.worker.completions import Acks
from fairq.worker.expiries import Expiries
from fairq.worker.joblog import describe, trace_of
from fairq.worker.runner import JobRunner
from fairq.worker.running import RunningJobs

log = logging.getLogger("fairq.worker")

MIN_WAIT = 0.005  # never wait less: a due time in the past must not turn into a busy loop
MAX_ERROR_WAIT = 30.0  # the longest pause between retries while the store fails
HANDOFF_CHECK = 1.0  # how often a fetch loop waiting on a job thread looks for a stop


class Fetcher:
    """Feeds ``runner`` until ``stopping`` is set, or (in burst mode) until nothing is left."""

    def __init__(
        self,
        backend: Backend,
        order: QueueOrder,
        running: RunningJobs,
        runner: JobRunner,
        *,
        worker_id: str,
        clock: Callable[[], float],
        idle_wait: float,
        burst: bool,
        stopping: threading.Event,
        expiries: Expiries,
        hooks: Hooks | None = None,
    ) -> None:
        self.backend = backend
        self.hooks = hooks or default_hooks(clock)
        self.expiries = expiries
        self.order = order
        self.running = running
        self.runner = runner
        self.worker_id = worker_id
        self.clock = clock
        self.idle_wait = idle_wait
        self.burst = burst
        self.stopping = stopping
        self.acks = Acks(backend, running, clock=clock, hooks=self.hooks)
        self._gate = threading.Lock()  # held while taking and starting jobs
        self._no_wait = threading.Event()  # clear while a wait on a job thread is under way
        self._no_wait.set()
        self._thread = threading.Thread(target=self._serve, name="fairq-fetch", daemon=True)

    def start(self) -> None:
        """Fetch on a new thread until ``stopping`` is set; a finished burst sets it too."""
        self._thread.start()

    def close(self) -> None:
        """Take no more jobs; returns once every job already taken has been started."""
        self.stopping.set()
        with self._gate:
            pass

    def _serve(self) -> None:
        try:
            self._run()
        finally:
            self.stopping.set()
            self._store_acks_until_sealed()

    def _store_acks_until_sealed(self) -> None:
        """After the stop: store acks as they fall due, until shutdown has sealed the buffer
        and the last ones are stored."""
        while self.running.wait_for_acks_or_seal():
            self.acks.store_due()

    def _run(self) -> None:
        error_wait = 0.0
        while not self.stopping.is_set():
            try:
                if not self._round():
                    return
                error_wait = 0.0
            except Exception as exc:
                if self.stopping.is_set():
                    return
                error_wait = min(max(error_wait * 2, 0.5), MAX_ERROR_WAIT)
                log.error(
                    "the store failed: %s; trying again in %.1f s",
                    describe(exc),
                    error_wait,
                    exc_info=trace_of(exc),
                    extra={"action": "store_error"},
                )
                self._pause(error_wait)

    def _pause(self, seconds: float) -> None:
        """Wait before using the store again, storing acks as they fall due (on their own
        back-off); ends early once they are stored (the store answers again) or on a stop."""
        end = time.monotonic() + seconds
        while not self.stopping.is_set() and (left := end - time.monotonic()) > 0:
            if self.running.wait_for_acks(self.stopping.is_set, left) and self.acks.store_due():
                return

    def _round(self) -> bool:
        """Start the jobs that fit, or wait for work; False when a burst is done."""
        self.running.wait_for_room()
        with self._gate:
            if self.stopping.is_set():
                return True
            leases = self._take()
            if leases is None:
                return True
            for call in self.runner.start(leases):
                self.runner.on_a_job_thread(call)
        return bool(leases) or self._idle()

    def _take(self) -> list[Lease] | None:
        """Fill the free slots and those of the jobs waiting for their ack, whose acks are
        stored first in the same call (their slots, here and a capped tenant's in the store,
        are free for its dequeue). None when there was no slot to fill after all (closed)."""
        done = self.running.take_acks()
        free = self.running.free() + len(done)
        if not done:
            return self._dequeue(self._asking(free)) if free else None

        def ack_and_dequeue(acks: AckManyParams) -> tuple[AckManyResult, list[Lease]]:
            both = AckAndDequeueParams(acks=acks, dequeue=self._asking(free))
            result = self.backend.ack_and_dequeue(both)
            return result.acks, self._taken(result.dequeue)

        return self.acks.store_with(done, ack_and_dequeue)

    def _dequeue(self, params: DequeueParams) -> list[Lease]:
        return self._taken(self.backend.dequeue(params))

    def _taken(self, result: DequeueResult) -> list[Lease]:
        """The leases a dequeue gave, once the leases its maintenance expired are reported."""
        self.expiries.report(result.expired)
        leases = list(result.leases)
        self.hooks.after_dequeue(leases)
        return leases

    def _asking(self, free: int, wait: float = 0.0) -> DequeueParams:
        return DequeueParams(
            queues=self.order.next(),
            worker_id=self.worker_id,
            now=self.clock(),
            limit=free,
            wait=wait,
        )

    def _any_ready(self) -> bool:
        """Asked only once a burst looks done: a slot freed elsewhere since our dequeue may have
        made a capped tenant's ready job available (an admin read, not a hot path)."""
        return any(
            row.ready > 0 and row.weight > 0  # a paused tenant's jobs wait for it
            for queue in self.order.queues
            for row in self.backend.stats(StatsParams(queue=queue))
        )

    def _idle(self) -> bool:
        """Nothing is ready: wait until something may be, and start what the wait brings.
        False when a burst is done."""
        while True:
            now = self.clock()
            maintained = self.backend.maintain(MaintainParams(now=now, queues=self.order.queues))
            self.expiries.report(maintained.expired)
            due = maintained.next_due
            if self.burst and due is None and len(self.running) == 0 and not self._any_ready():
                log.info("no job is ready or scheduled: burst done", extra={"action": "burst_done"})
                return False
            timeout = self.idle_wait if due is None else min(self.idle_wait, due - now)
            if self.stopping.is_set():
                return True
            asked = self.running.free()
            leases = self._wait_on_a_job_thread(self._asking(asked, max(timeout, MIN_WAIT)))
            if self.stopping.is_set() or not 0 < len(leases) < asked:
                return True
            # Fewer than asked: nothing else was ready when that dequeue ran, so wait again
            # at once instead of asking again first.

    def _wait_on_a_job_thread(self, params: DequeueParams) -> list[Lease]:
        """The waiting dequeue, run on a job thread that then runs the first ``def`` job it
        brings itself: handing that job to another thread would cost a thread switch on the way to
        it (about half a millisecond, measured on a 2-vCPU VM). Outside the gate, so that
        close() never waits for the wait; this thread waits for what it took, storing the acks
        that fall due meanwhile."""
        handoff: queue.SimpleQueue[list[Lease] | BaseException] = queue.SimpleQueue()
        began = threading.Event()

        def wait_then_run() -> None:
            self._no_wait.clear()  # before the look at `stopping`: see wait_ended
            began.set()
            try:
                leases = [] if self.stopping.is_set() else self._dequeue(params)
                first = self._start_waited(leases)
            except BaseException as exc:  # the fetch loop's to handle (back-off, stop)
                handoff.put(exc)
                self.running.wake()
                return
            finally:
                self._no_wait.set()
            handoff.put(leases)
            self.running.wake()
            if first is not None:
                first()

        def arrived() -> bool:
            return not handoff.empty()

        self.runner.on_a_job_thread(wait_then_run)
        while not arrived():
            if self.running.wait_for_acks(arrived, HANDOFF_CHECK):
                self.acks.store_due()
            # Stopping, and the pool (shut down, or its threads stuck in jobs handed back)
            # never began the wait: don't wait for it. Should it begin later, it finds the
            # worker stopping and takes nothing.
            elif self.stopping.is_set() and not began.is_set():
                return []
        taken = handoff.get()
        if isinstance(taken, BaseException):
            raise taken
        return taken

    def wait_ended(self, timeout: float) -> bool:
        """Block until no wait on a job thread is under way (one that began before the stop
        has started or handed back what it took); False if ``timeout`` passed first. Shutdown
        asks before the process ends: jobs it handed back may wake such a wait, which takes
        them, and must not be left holding them when the process ends."""
        return self._no_wait.wait(timeout)

    def _start_waited(self, leases: list[Lease]) -> Callable[[], None] | None:
        """Start what a wait took but one ``def`` job, which comes back for the caller to
        run; if the worker began to stop, hand everything back instead."""
        with self._gate:
            if self.stopping.is_set():
                self._hand_back(leases)
                return None
            calls = self.runner.start(leases)
            for call in calls[1:]:
                self.runner.on_a_job_thread(call)
            return calls[0] if calls else None

    def _hand_back(self, leases: list[Lease]) -> None:
        """Jobs taken by a wait that ended after the worker began to stop: ready again now."""
        for lease in leases:
            try:
                self.backend.release(ReleaseParams(token=lease.token, now=self.clock()))
            except Exception as exc:
                log.warning(
                    "job %s taken while stopping could not be handed back (%s); it runs again "
                    "when its lease expires",
                    lease.job_id,
                    describe(exc),
                    extra={"action": "hand_back_failed", "job_id": lease.job_id},
                )
