"""Through real processes: fair tasks enqueued into fairq, ``fairq relay`` releasing them into
RQ, plain ``rq worker`` processes running them, over every store."""

from __future__ import annotations

import json
from collections import Counter

import rq_tasks
from conftest import Processes, notes, released, wait_for
from redis import Redis
from rq import Queue

from fairq import App, JobState
from fairq.cancel import CancelOutcome


def started(broker: Redis, key: str) -> list[tuple[str, int]]:
    return [(tenant, n) for event, tenant, n, _ in notes(broker, key) if event == "start"]


def ended(broker: Redis, key: str) -> list[tuple[str, int]]:
    return [(tenant, n) for event, tenant, n, _ in notes(broker, key) if event == "end"]


def all_in(app: App, ids: list[str], state: JobState) -> bool:
    return all((info := app.job_info(i)) is not None and info.state is state for i in ids)


def most_at_once(broker: Redis, key: str) -> tuple[dict[str, int], int]:
    """The most runs of each tenant, and of all, that overlapped (from the start/end notes)."""
    running: Counter[str] = Counter()
    most: Counter[str] = Counter()
    total = most_total = 0
    for event, tenant, _, _ in notes(broker, key):
        step = 1 if event == "start" else -1
        running[tenant] += step
        total += step
        most[tenant] = max(most[tenant], running[tenant])
        most_total = max(most_total, total)
    return dict(most), most_total


def test_fair_order_through_rq(
    app: App, processes: Processes, queue_name: str, key: str, broker: Redis
) -> None:
    """Weights 1:3:6 through the relay, one RQ worker, one job in flight: each round of ten
    starts gives every tenant its share within one job (run times, charged as measured, vary
    a little: the exact order with equal costs is the conformance suite's)."""
    weights = {"light": 1, "mid": 3, "heavy": 6}
    for tenant, weight in weights.items():
        app.set_tenant(queue_name, tenant, weight=weight)
    queue = rq_tasks.fair.queue(queue_name)
    backlog = {"light": 4, "mid": 8, "heavy": 14}  # each stays backlogged for 20 starts
    for n in range(max(backlog.values())):
        for tenant in weights:
            if n < backlog[tenant]:
                queue.enqueue(rq_tasks.record, tenant, key, n, work=0.05)
    processes.worker()
    processes.relay(in_flight=1)
    wait_for(lambda: len(started(broker, key)) >= 20, "20 jobs to start")
    order = [tenant for tenant, _ in started(broker, key)[:20]]
    for first in (0, 10):  # each round of ten starts: 1, 3 and 6, each within one job
        counts = Counter(order[first : first + 10])
        assert all(abs(counts[t] - w) <= 1 for t, w in weights.items()), (first, order)
    for length in range(1, len(order) + 1):  # and no prefix strays further than two
        counts = Counter(order[:length])
        share = {t: length * w / sum(weights.values()) for t, w in weights.items()}
        assert all(abs(counts[t] - share[t]) <= 2 for t in weights), (length, order)
    running = [s for s in app.stats(queue=queue_name) if s.running]
    assert sum(s.running for s in running) <= 1  # in flight: 1


def test_the_relay_calls_the_apps_tenant_weights_callback_before_it_releases(
    app: App, processes: Processes, queue_name: str, key: str, broker: Redis
) -> None:
    """``fairq relay`` calls the App's ``@app.tenant_weights`` callback of its queue, as a
    native worker does, before its first release: the weights it returns (light 1, heavy 3;
    none stored) decide the order the relay releases in (1:1 would give lhlhhhhh)."""
    queue = rq_tasks.fair.queue(queue_name)
    tenant_of = {}
    for n in range(6):
        for tenant in ("light", "heavy") if n < 2 else ("heavy",):
            tenant_of[queue.enqueue(rq_tasks.paced, tenant, key, n, 0.0).id] = tenant  # type: ignore[union-attr]
    relay = processes.relay(
        in_flight=8,
        RQ_TEST_WEIGHTS='{"light": 1, "heavy": 3}',
        RQ_TEST_WEIGHTS_QUEUE=queue_name,
    )
    wait_for(lambda: len(released(relay)) == 8, "every job released")
    assert "".join(tenant_of[i][0] for i in released(relay)) == "lhhhlhhh"
    assert {s.tenant: s.weight for s in app.stats(queue=queue_name)} == {"light": 1, "heavy": 3}
    asked = broker.lrange(f"{queue_name}:asked", 0, -1)
    assert [json.loads(a) for a in asked] == [["heavy", "light"]]  # the tenants with jobs


def test_a_killed_worker_s_job_runs_again_after_its_lease(
    app: App, processes: Processes, queue_name: str, key: str, broker: Redis
) -> None:
    queue = rq_tasks.fair.queue(queue_name)
    stalled = queue.enqueue(rq_tasks.stall, "acme", key, 0)
    after = queue.enqueue(rq_tasks.record, "beta", key, 1)
    first = processes.worker()
    processes.relay(in_flight=1)
    wait_for(lambda: ("acme", 0) in started(broker, key), "the stalling job to start")
    horse = next(pid for event, _, n, pid in notes(broker, key) if n == 0)
    processes.kill(first, horse)  # SIGKILL: the worker and its work horse, mid-job
    processes.worker()
    ids = [stalled.id, after.id]  # type: ignore[union-attr]
    wait_for(lambda: all_in(app, ids, JobState.SUCCEEDED), "both jobs to succeed")
    assert Counter(started(broker, key)) == {("acme", 0): 2, ("beta", 1): 1}
    assert Counter(ended(broker, key)) == {("acme", 0): 1, ("beta", 1): 1}
    assert app.job_info(stalled.id).attempts == 2  # type: ignore[union-attr]
    assert all(s.running == 0 for s in app.stats(queue=queue_name))  # no slot held


def test_a_failing_task_is_retried_by_fairq_then_dead(
    app: App, processes: Processes, queue_name: str, key: str, broker: Redis
) -> None:
    queue = rq_tasks.fair.queue(queue_name)
    failing = queue.enqueue(rq_tasks.boom, "acme", key, 7)
    fine = queue.enqueue(rq_tasks.record, "beta", key, 8)
    processes.worker()
    processes.relay(in_flight=2)
    wait_for(lambda: all_in(app, [failing.id], JobState.DEAD), "the failing job to be dead")  # type: ignore[union-attr]
    wait_for(lambda: all_in(app, [fine.id], JobState.SUCCEEDED), "the other job to succeed")  # type: ignore[union-attr]
    info = app.job_info(failing.id)  # type: ignore[union-attr]
    assert (
        info is not None
        and info.attempts == 2
        and "RuntimeError: boom 7" in (info.last_error or "")
    )
    assert started(broker, key).count(("acme", 7)) == 2  # fairq's two attempts, no RQ retry
    failed = Queue(queue_name, connection=broker).failed_job_registry
    wait_for(lambda: failed.count == 2, "RQ to record both failed runs")  # after fairq did
    assert [d.id for d in app.dead(queue=queue_name)] == [failing.id]  # type: ignore[union-attr]


def test_a_running_task_sees_a_cancel_request_and_ends_cancelled(
    app: App, processes: Processes, queue_name: str, key: str, broker: Redis
) -> None:
    """In RQ's work horse (a forked process per job) as in a native worker: the heartbeat's
    reply reaches ``fairq.current_job()``, and a task that stops on it ends cancelled."""
    job = rq_tasks.fair.queue(queue_name).enqueue(rq_tasks.stoppable, "acme", key, 1)
    processes.worker()
    processes.relay(in_flight=1)
    wait_for(lambda: ("acme", 1) in started(broker, key), "the task to start")
    assert app.cancel(job.id) is CancelOutcome.REQUESTED  # type: ignore[union-attr]
    wait_for(lambda: all_in(app, [job.id], JobState.CANCELLED), "the task to end cancelled")  # type: ignore[union-attr]
    assert ended(broker, key) == [("acme", 1)]
    assert app.job_info(job.id).attempts == 1  # type: ignore[union-attr]  # never retried
