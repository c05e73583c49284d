"""A master of a real Redis Cluster is killed while worker processes drain jobs spread over
every master; its replica takes over, and the workers carry on.

What is checked: every job runs at least once (its tag is in the run log) and ends succeeded
in the store (none lost, none dead, nothing left ready, scheduled or running); the workers
are still running after the failover and exit 0 on SIGTERM; the promoted replica serves
fairq's functions without a reload. The jobs are enqueued with ``wait_replicas=1`` (an enqueue
returns once a replica has its jobs and their ids' claims): what Redis's asynchronous
replication may still lose is the masters' writes of the drain (a lease handed out, an ack),
which can only make a job run again (docs/redis.md).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from fairq.backends.redis import RedisBackend
from fairq.contract import GetJobsParams, StatsParams
from fairq.job import JobState

from .cluster_apps import make_app, runs
from .helpers import QUEUES
from .servers import LocalCluster, wait_until

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.redis_cluster.cluster_apps:app"
JOBS = 600
DEADLINE = 180.0  # only so a broken failover fails the test instead of hanging it

pytestmark = pytest.mark.processes


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """A cluster of this test's own: a replica takes over 1.5 s after its master stops."""
    started = LocalCluster(tmp_path / "cluster", node_timeout_ms=1500).start()
    yield started
    started.stop()


def test_workers_carry_on_through_a_failover_and_no_job_is_lost(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    url = f"{cluster.url}&prefix=fo"
    producer = make_app(f"{url}&wait_replicas=1&wait_timeout=5")
    touch = producer.jobs["touch"]
    calls = [
        touch.options(queue=QUEUES[n % len(QUEUES)]).call(f"t{n % 5}", str(tmp_path), str(n), 10)
        for n in range(JOBS)
    ]
    ids = [
        job_id
        for at in range(0, JOBS, 100)
        for job_id in producer.enqueue_many(calls[at : at + 100])
    ]
    producer.close()
    victim = cluster.master_of(f"fo:{{{QUEUES[0]}}}:meta")
    (heir,) = cluster.replicas_of(victim)

    order = ",".join(f"{q}:1" for q in QUEUES)
    env = {**os.environ, "FAIRQ_TEST_URL": url}
    workers = []
    for n in range(2):
        with (tmp_path / f"worker{n}.log").open("wb") as log:
            workers.append(subprocess.Popen(
                [sys.executable, "-m", "fairq", "worker", APP, "--queues", order,
                 "--concurrency", "4"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            ))  # fmt: skip
    logs = lambda: "\n".join(p.read_text(errors="replace") for p in tmp_path.glob("worker*.log"))  # noqa: E731
    try:
        # both workers up before the kill: the test is of workers that carry on, not of one
        # that starts while a master is down (under load the second one was still starting)
        wait_until(lambda: logs().count(" started: store ") == 2, "both workers", DEADLINE)
        wait_until(lambda: len(set(runs(tmp_path))) >= JOBS // 4, "a quarter of the jobs", DEADLINE)
        cluster.kill(victim)
        wait_until(
            lambda: cluster.roles().get(heir) == "master", "the replica to take over", DEADLINE
        )
        wait_until(lambda: len(set(runs(tmp_path))) == JOBS, "every job to run", DEADLINE)

        store = RedisBackend.from_url(url)
        try:

            def settled() -> bool:
                found = store.get_jobs(GetJobsParams(ids=ids))
                return len(found) == JOBS and all(j.state is JobState.SUCCEEDED for j in found)

            wait_until(settled, "every job to be stored as succeeded", DEADLINE)
            rows = store.stats(StatsParams())
            assert sum(r.ready + r.scheduled + r.running + r.dead for r in rows) == 0
            assert {r.queue for r in rows} == set(QUEUES)
        finally:
            store.close()
        assert all(w.poll() is None for w in workers), logs()
        with redis.Redis(port=heir) as promoted:
            assert len(promoted.function_list()) == 1  # replicated: no reload needed
        cluster.restart(victim)  # it comes back as a replica of its heir
        cluster.wait_healthy(DEADLINE)
        assert cluster.roles()[victim] == "slave"
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        assert [w.wait(timeout=60) for w in workers] == [0, 0], logs()
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    again = Counter(runs(tmp_path))
    print(f"jobs run more than once: {sum(1 for c in again.values() if c > 1)} of {JOBS}")
