"""Cancel requests reach a worker's running jobs within about a second.

The heartbeat brings them too, in its own reply, but it beats every third of a lease (20 s for
the default minute): too late for a ``def`` job that looks through ``fairq.current_job()``.
Beating every second would cost one lease extension per job per second. Instead one thread per
worker asks the store every ``CHECK_EVERY`` seconds, while jobs run, which of its running jobs
were asked to stop: one ``get_jobs`` call of a few ids (at most ``--concurrency``), on every
store alike, and nothing while the worker is idle.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from fairq.contract import Backend, GetJobsParams
from fairq.worker.joblog import describe, job_fields
from fairq.worker.running import RunningJobs

log = logging.getLogger("fairq.worker")

#: Seconds between two looks at the running jobs' cancel requests.
CHECK_EVERY = 1.0


class CancelWatch:
    """A daemon thread marking the running jobs asked to stop, until ``stop``."""

    def __init__(
        self, backend: Backend, running: RunningJobs, *, interval: float = CHECK_EVERY
    ) -> None:
        self.backend = backend
        self.running = running
        self.interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fairq-cancels", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _serve(self) -> None:
        while not self._stopped.wait(self.interval):
            held = self.running.not_asked()
            if held:
                self._look(held)

    def _look(self, held: dict[str, str]) -> None:
        try:
            jobs = self.backend.get_jobs(GetJobsParams(ids=list(held)))
        except Exception as exc:  # the heartbeat and the fetch loop report a store outage
            log.debug("cancel requests not read: %s", describe(exc))
            return
        asked = [held[job.id] for job in jobs if job.cancel_requested and job.id in held]
        if asked:
            ask_to_stop(self.running, asked)


def ask_to_stop(running: RunningJobs, tokens: Sequence[str]) -> None:
    """Mark the jobs of ``tokens`` asked to stop (an async one is interrupted), and log each
    newly asked one; from the heartbeat's reply or from a ``CancelWatch`` look."""
    for lease in running.request_cancel(tokens):
        log.info(
            "job %s %s was asked to stop (a cancel request); it ends cancelled once it stops",
            lease.job_id,
            lease.name,
            extra=job_fields(lease, "cancel_requested"),
        )
