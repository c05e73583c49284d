"""The async API on every store: what ``aenqueue`` and friends store is what their blocking
twins store, read back both ways.

Each scenario runs on the reference model, SQLite, Redis and PostgreSQL (conftest.py) through
``App``'s async methods, and checks the store with both the async and the blocking reads.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence

import pytest
from conformance.helpers import new_job

from fairq import App, JobState, Rate, Throttle
from fairq.cancel import CancelOutcome
from fairq.contract import (
    EnqueueParams,
    GetJobsParams,
    GetQueueParams,
    MaintainParams,
    QueueSettings,
)
from fairq.errors import ConfigError, DuplicateJob, JobFailed, NoResult, ResultTimeout, UnknownJob
from fairq.instrument import Middleware, StoreCall
from fairq.job import JobInfo, NewJob, decode_payload

from .conftest import NOW, run

AppFactory = Callable[..., App]


def declare(app: App) -> None:
    """The jobs of these scenarios, declared on ``app``."""

    @app.job(tenant="account", name="tests.work")
    def work(account: str, n: int) -> None: ...


def comparable(info: JobInfo | None) -> dict[str, object]:
    """A job as inspection shows it, but its id and arguments (which differ by design)."""
    assert info is not None
    found = dataclasses.asdict(info)
    del found["id"], found["payload"]
    return found


def test_aenqueue_stores_what_enqueue_stores(make_app: AppFactory) -> None:
    app = make_app()
    declare(app)
    work = app.jobs["tests.work"]

    async def scenario() -> tuple[str, JobInfo | None, list[object]]:
        job_id = await work.aenqueue("acme", 1)
        return job_id, await app.ajob_info(job_id), list(await app.astats("default"))

    async_id, async_info, async_stats = run(app, scenario)
    sync_id = work.enqueue("acme", 2)
    assert async_info is not None and async_info.state is JobState.READY
    assert (async_info.tenant, async_info.queue, async_info.name) == (
        "acme",
        "default",
        "tests.work",
    )
    assert decode_payload(async_info.payload) == (["acme", 1], {})
    assert comparable(async_info) == comparable(app.job_info(sync_id))
    assert app.job_info(async_id) == async_info
    (row,) = async_stats
    assert (row.tenant, row.ready) == ("acme", 1)
    assert [(r.tenant, r.ready) for r in app.stats("default")] == [("acme", 2)]


def test_aenqueue_many_is_one_batch_with_options(make_app: AppFactory) -> None:
    app = make_app()
    declare(app)
    work = app.jobs["tests.work"]

    async def scenario() -> list[JobInfo]:
        ids = await app.aenqueue_many(
            [
                work.call("a", 1),
                work.options(tenant="b", delay=60, priority=3, headers={"h": "v"}).call("a", 2),
            ]
        )
        store = await app.async_store()
        return await store.get_jobs(GetJobsParams(ids=ids))

    first, second = run(app, scenario)
    assert (first.tenant, first.state) == ("a", JobState.READY)
    assert (second.tenant, second.state, second.run_at) == ("b", JobState.SCHEDULED, NOW + 60)
    assert (second.priority, dict(second.headers)) == (3, {"h": "v"})


def test_aenqueue_by_name_reads_published_job_types(make_app: AppFactory) -> None:
    """An App that does not declare a job enqueues it by the name a worker published: the
    async enqueue asks the store for the published types, as the blocking one does."""
    worker_app = make_app()
    declare(worker_app)
    worker_app.publish()
    producer = make_app()

    async def scenario() -> JobInfo | None:
        job_id = await producer.aenqueue("tests.work", ["acme", 7])
        return await producer.ajob_info(job_id)

    info = run(producer, scenario)
    assert info is not None and (info.tenant, info.queue) == ("acme", "default")
    with pytest.raises(UnknownJob) as blocking:
        producer.enqueue("tests.nothing", [1])

    async def unknown() -> None:
        with pytest.raises(UnknownJob) as awaited:
            await producer.aenqueue("tests.nothing", [1])
        assert str(awaited.value) == str(blocking.value)

    run(producer, unknown)


def test_throttle_rules_route_async_enqueues_as_blocking_ones(make_app: AppFactory) -> None:
    app = make_app()
    app.queue("slow")

    @app.job(tenant="account", name="tests.burst", throttle=[Throttle(1, 3600, "slow")])
    def burst(account: str) -> None: ...

    async def scenario() -> list[str]:
        ids = [await burst.aenqueue("a") for _ in range(3)]
        return [(await app.ajob_info(i)).queue for i in ids]  # type: ignore[union-attr]

    routed = run(app, scenario)
    blocking = [app.job_info(burst.enqueue("b")).queue for _ in range(3)]  # type: ignore[union-attr]
    assert routed == blocking == ["default", "slow", "slow"]


def test_sharded_queue_places_async_enqueues_in_the_tenants_shards(make_app: AppFactory) -> None:
    app = make_app()
    app.queue("imports", shards=4, shard_size=2)

    @app.job(tenant="account", queue="imports", name="tests.imp")
    def imp(account: str) -> None: ...

    shards = set(app.queues["imports"].shards_of("acme"))

    async def scenario() -> list[str]:
        ids = await app.aenqueue_many([imp.call("acme") for _ in range(4)])
        return [(await app.ajob_info(i)).queue for i in ids]  # type: ignore[union-attr]

    placed = run(app, scenario)
    assert set(placed) <= shards


def test_concurrent_aenqueues_all_land(make_app: AppFactory) -> None:
    """Many enqueues in flight at once in one loop (one async store): every job is stored."""
    app = make_app()
    declare(app)
    work = app.jobs["tests.work"]

    async def scenario() -> list[str]:
        return list(await asyncio.gather(*(work.aenqueue(f"t{n % 3}", n) for n in range(30))))

    ids = run(app, scenario)
    assert len(set(ids)) == 30
    # PostgreSQL: an enqueue whose tenant another transaction held left its job in the inbox
    # (functions/enqueue.sql), counted in its tenant once taken in (maintenance does)
    app.backend.maintain(MaintainParams(now=NOW))
    assert sum(row.ready for row in app.stats("default")) == 30
    assert len(app.backend.get_jobs(GetJobsParams(ids=ids))) == 30


def test_async_store_refuses_a_used_id_and_stores_nothing_of_the_batch(
    make_app: AppFactory,
) -> None:
    app = make_app()

    def jobs(*numbers: int) -> Sequence[NewJob]:
        return [dataclasses.replace(new_job(n), id=f"dup-{n}") for n in numbers]

    async def scenario() -> list[JobInfo]:
        store = await app.async_store()
        await store.enqueue(EnqueueParams(jobs=jobs(1, 2), now=NOW))
        with pytest.raises(DuplicateJob):
            await store.enqueue(EnqueueParams(jobs=jobs(3, 1), now=NOW))
        return await store.get_jobs(GetJobsParams(ids=["dup-1", "dup-2", "dup-3"]))

    assert [info.id for info in run(app, scenario)] == ["dup-1", "dup-2"]


def test_settings_and_inspection_awaited(make_app: AppFactory) -> None:
    app = make_app()
    declare(app)
    work = app.jobs["tests.work"]

    async def scenario() -> None:
        await work.aenqueue("acme", 1)
        changed = await app.aset_tenant("default", "acme", weight=3, max_running=2)
        assert (changed.tenant, changed.weight, changed.max_running) == ("acme", 3, 2)
        await app.aset_queue("default", weight=2, max_in_flight=5)
        (row,) = await app.astats(tenant="acme")
        assert (row.weight, row.max_running, row.ready) == (3, 2, 1)
        assert await app.adead() == []
        assert await app.arequeue(["nope"]) == 0
        assert isinstance(await app.afigures(), list)
        assert await app.ajob_info("nope") is None

    run(app, scenario)
    assert app.stats(tenant="acme")[0].weight == 3


def test_aset_queue_changes_only_the_settings_it_is_given(make_app: AppFactory) -> None:
    app = make_app()

    async def scenario() -> QueueSettings:
        await app.aset_queue("default", max_running=4, rate="10/s")
        await app.aset_queue("default", max_in_flight=20)
        return app.backend.get_queue(GetQueueParams(queue="default"))

    assert run(app, scenario) == QueueSettings(
        queue="default", max_running=4, rate=Rate(10, 1.0), max_in_flight=20
    )


class Recorder(Middleware):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def before_enqueue(self, jobs: Sequence[NewJob]) -> Sequence[NewJob] | None:
        self.seen.append(f"before {len(jobs)}")
        return [dataclasses.replace(job, headers={"traced": "yes"}) for job in jobs]

    def after_enqueue(
        self, jobs: Sequence[NewJob], queues: Sequence[str] | None, error: BaseException | None
    ) -> None:
        self.seen.append(f"after {list(queues or [])} {error!r}")

    def store_call(self, call: StoreCall) -> None:
        self.seen.append(f"store {call.op} {call.error!r}")


def test_hooks_and_store_timing_see_async_enqueues(make_app: AppFactory) -> None:
    """The App's own hook objects fire for async enqueues, and the async store's calls are
    timed like the blocking store's (``store_call``)."""
    recorder = Recorder()
    app = make_app(middleware=[recorder])
    declare(app)
    work = app.jobs["tests.work"]

    async def scenario() -> JobInfo | None:
        job_id = await work.aenqueue("acme", 1)
        return await app.ajob_info(job_id)

    info = run(app, scenario)
    assert info is not None and dict(info.headers) == {"traced": "yes"}
    assert recorder.seen == ["before 1", "store enqueue None", "after ['default'] None"]


NATIVE = {
    "model": set(),
    "sqlite": set(),
    "redis": {"enqueue", "set_tenant", "set_queue", "job_types", "get_jobs", "stats"},
    "redis-cluster": set(),  # a Cluster's enqueue blocks across slots: a thread (Offloaded)
    "postgres": {"enqueue", "set_tenant", "job_types", "get_jobs", "stats"},
}


def test_each_store_has_its_async_face(make_app: AppFactory, kind: str) -> None:
    """Redis and PostgreSQL enqueue and read over their asyncio clients; SQLite and a Redis
    Cluster go through a thread; the model, which does no I/O, is called in the loop
    (docs/async.md)."""
    app = make_app()

    async def scenario() -> tuple[set[str], str]:
        store = await app.async_store()
        return set(store.native), type(store).__name__

    native, name = run(app, scenario)
    assert native == NATIVE[kind]
    expected = {"redis": "AsyncRedisStore", "postgres": "AsyncPostgresStore"}
    assert name == expected.get(kind, "Offloaded")


def test_unique_key_held_returns_the_holders_id_awaited(make_app: AppFactory) -> None:
    app = make_app()

    @app.job(tenant="account", name="tests.sync_account", unique_for=3600, unique_key="{account}")
    def sync_account(account: str, n: int) -> None: ...

    async def scenario() -> tuple[str, str]:
        first = await sync_account.aenqueue("acme", 1)
        return first, await sync_account.aenqueue("acme", 2)

    first, again = run(app, scenario)
    assert again == first == sync_account.enqueue("acme", 3)
    assert [row.ready for row in app.stats(tenant="acme")] == [1]


def test_cancel_and_result_awaited(make_app: AppFactory) -> None:
    app = make_app()

    @app.job(tenant="account", name="tests.report", result_ttl=3600)
    def report(account: str) -> int:
        return 1

    async def scenario() -> None:
        job_id = await report.aenqueue("acme")
        with pytest.raises(ResultTimeout):
            await app.aresult(job_id, timeout=0)
        assert await app.acancel(job_id) is CancelOutcome.CANCELLED
        assert (await app.ajob_info(job_id)).state is JobState.CANCELLED  # type: ignore[union-attr]
        with pytest.raises(JobFailed):
            await app.aresult(job_id, timeout=0)
        assert await app.acancel_many([job_id, "nope"]) == [
            CancelOutcome.FINISHED,
            CancelOutcome.UNKNOWN,
        ]
        with pytest.raises(NoResult):
            await app.aresult("nope")
        with pytest.raises(ConfigError):
            await app.acancel_many("not-a-list")  # type: ignore[arg-type]

    run(app, scenario)
