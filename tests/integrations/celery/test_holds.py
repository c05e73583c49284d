"""A relay that dies or stops holding jobs it sent and no worker claimed (issue #28): the
queue's in-flight cap does not stall for the jobs' lease (60 s), they come back within the
relay's hold (10 s), or at once when it stops, and the broker's stale copies are skipped when
a worker takes them: each job runs once."""

from __future__ import annotations

from collections import Counter

import pytest

from fairq import JobState
from fairq.contract import MaintainParams

from .conftest import Setup, wait_done, wait_for

pytestmark = pytest.mark.processes

LAPSED = "no worker claimed it before its relay's hold lapsed"


def send(setup: Setup, tenants: str) -> list[str]:
    paced = setup.project.celery.tasks["proj.paced"]
    return [paced.apply_async((t, t, setup.log, 0.0), queue=setup.queue).id for t in tenants]


def test_a_killed_relays_unclaimed_jobs_are_released_again_within_the_hold(
    redis_setup: Setup,
) -> None:
    setup = redis_setup
    ids = send(setup, "ab")
    first = setup.relay("--in-flight", "2", log_level="debug")
    wait_for(lambda: len(first.released()) == 2, "two jobs in the broker, no worker yet")
    first.kill()  # SIGKILL: both jobs out, unclaimed, and the queue full
    second = setup.relay(log_level="debug")  # keeps the in-flight cap the first one stored
    wait_for(lambda: second.log().count(LAPSED) == 2, "the holds to lapse", timeout=30)
    wait_for(lambda: sorted(second.released()) == sorted(ids), "both released again")
    setup.worker(concurrency=2)  # four messages: two stale copies, two live ones
    wait_done(setup.project.fair.app, ids)
    assert Counter(setup.started_tags()) == {"a": 1, "b": 1}  # each ran once
    assert [setup.project.fair.app.job_info(i).attempts for i in ids] == [1, 1]  # type: ignore[union-attr]


def test_a_stopped_relay_gives_its_unclaimed_jobs_back_at_once(sqlite_setup: Setup) -> None:
    setup = sqlite_setup
    app = setup.project.fair.app
    ids = send(setup, "ab")
    relay = setup.relay("--in-flight", "2", log_level="debug")
    wait_for(lambda: len(relay.released()) == 2, "two jobs in the broker, no worker yet")
    relay.stop()  # SIGTERM
    assert relay.process.returncode == 0
    assert "gave back 2 released jobs no worker had claimed" in relay.log()
    expired = app.backend.maintain(MaintainParams(now=app.clock())).expired
    assert sorted((e.job_id, e.claimed) for e in expired) == sorted((i, False) for i in ids)
    assert all(app.job_info(i).state is JobState.READY for i in ids)  # type: ignore[union-attr]
    setup.relay("--in-flight", "2")
    setup.worker(concurrency=2)
    wait_done(app, ids)
    assert Counter(setup.started_tags()) == {"a": 1, "b": 1}  # each ran once
