"""A relay that dies or stops holding jobs it published and no worker claimed (issue #28): the
queue's in-flight cap does not stall for a job's lease, the jobs come back within the relay's
hold (or at once when it stops), and the broker's stale copies are skipped, never run twice.

The jobs' lease (600 s) is far longer than the test: only the hold can bring them back."""

from __future__ import annotations

import os
import signal

from conftest import Harness, wait_for

from fairq import JobState
from fairq.contract import MaintainParams

LAPSED = "no worker claimed it before its relay's hold lapsed"
STALE = "this message is an older copy"


def test_a_killed_relays_unclaimed_job_is_released_again_within_the_hold(
    harness: Harness,
) -> None:
    """One job out (in flight 1), its relay killed before any worker ran: the queue is full
    until the hold lapses, then a second relay releases the job again. The worker (two
    threads, prefetching both messages at once) skips the stale copy and runs the job once."""
    work = harness.use_lease(600.0).work
    job_id = work.send("a", 0, 0.0).message_id
    first = harness.relay(1, log_level="debug")
    wait_for(lambda: first.released() == [job_id], "the job in the broker, no worker yet")
    first.kill()  # SIGKILL: the job is out, unclaimed, and the queue is full
    second = harness.relay(1, log_level="debug")
    wait_for(lambda: LAPSED in second.log(), "the dead relay's hold to lapse")
    wait_for(lambda: second.released() == [job_id], "the second relay to release it again")
    worker = harness.worker(threads=2)
    harness.wait_jobs([job_id], JobState.SUCCEEDED)
    # the first relay's copy, skipped: its thread may take it after the job's own run ended
    wait_for(lambda: STALE in worker.log(), "the worker to skip the first relay's copy")
    assert [(r.tenant, r.n) for r in harness.records("start")] == [("a", 0)]  # run once
    assert worker.log().count(STALE) == 1
    info = harness.actors.fair.app.job_info(job_id)
    assert info is not None and info.attempts == 1  # a lapsed hold is no attempt


def test_a_stopped_relay_gives_its_unclaimed_jobs_back_at_once(harness: Harness) -> None:
    work = harness.use_lease(600.0).work
    app = harness.actors.fair.app
    ids = [work.send("a", n, 0.0).message_id for n in range(2)]
    relay = harness.relay(2, log_level="debug")
    wait_for(lambda: len(relay.released()) == 2, "two jobs in the broker, no worker yet")
    os.killpg(relay.popen.pid, signal.SIGTERM)
    assert relay.popen.wait(timeout=30) == 0
    assert "gave back 2 released jobs no worker had claimed" in relay.log()
    expired = app.backend.maintain(MaintainParams(now=app.clock())).expired
    assert sorted((e.job_id, e.claimed) for e in expired) == sorted((i, False) for i in ids)
    assert all(app.job_info(i).state is JobState.READY for i in ids)  # type: ignore[union-attr]
    harness.relay(2)
    harness.worker(threads=2)
    harness.wait_jobs(ids, JobState.SUCCEEDED)
    assert sorted(r.n for r in harness.records("start")) == [0, 1]  # each ran once
