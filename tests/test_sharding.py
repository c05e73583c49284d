"""Shuffle sharding at the App and the worker: declaration, routing through the store, worker
pools per shard, restarts and changed settings. (The store's choice itself is in
tests/conformance/test_shards.py, the hash in tests/test_shards_policy.py.)"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import click.testing
import pytest

import fairq.cli.worker  # noqa: F401  (registers the command)
from fairq import App, JobState
from fairq.app import JobDefinition
from fairq.cli import cli
from fairq.contract import StatsParams
from fairq.errors import ConfigError
from fairq.policy.shards import tenant_shards
from fairq.policy.throttle import Throttle
from fairq.worker import Worker

N, K = 8, 2


def shards(tenant: str) -> set[int]:
    return set(tenant_shards("imports", tenant, N, K))


def pick_tenants() -> dict[str, str]:
    """Tenant names, by the hash itself, in each relation to the flooding tenant's shards:
    'twin' has the same two, 'neighbour' one of them, 'stranger' none."""
    flood = shards("flood")
    found: dict[str, str] = {}
    used = set(flood)
    for n in range(10_000):
        name = f"t{n}"
        mine = shards(name)
        if "twin" not in found and mine == flood:
            found["twin"] = name
        elif "neighbour" not in found and len(mine & flood) == 1 and not (mine - flood) & used:
            found["neighbour"], used = name, used | mine
        elif "stranger" not in found and not mine & used:
            found["stranger"], used = name, used | mine
        if len(found) == 3:
            return found
    raise AssertionError("no such tenants among t0..t9999")


class Starts:
    """What each job records as it starts: (tenant, n), in order; and the App's clock, which
    each job moves on by one second, so every run is charged exactly 1 (fairness is in
    worker-seconds, and real run times would make the order depend on the machine)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str, int]] = []
        self.now = 1_000_000.0

    def add(self, tenant: str, n: int) -> None:
        with self.lock:
            self.seen.append((tenant, n))
            self.now += 1.0

    def clock(self) -> float:
        return self.now


def sharded_app(url: str, starts: Starts, **sharding: object) -> tuple[App, JobDefinition]:  # type: ignore[type-arg]
    app = App(url, clock=starts.clock)
    app.queue("imports", shards=N, shard_size=K, **sharding)  # type: ignore[arg-type]

    @app.job(name="work", queue="imports", tenant="tenant")
    def work(tenant: str, n: int) -> None:
        starts.add(tenant, n)

    return app, work


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/s.db"


@pytest.fixture(params=["memory", "sqlite"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], str]:
    """A new, empty store's URL at each call."""
    numbers = itertools.count()
    if request.param == "memory":
        return lambda: "memory://"
    return lambda: f"sqlite:///{tmp_path}/s{next(numbers)}.db"


def drain(app: App, queues: list[str]) -> None:
    """A burst worker (concurrency 1) for each of ``queues`` in turn, until it is idle. A pool
    per shard: shards share nothing, so serving them one after another gives each the order
    it would have with all running at once, and the clock moves only in the one running job."""
    for queue in queues:
        worker = Worker(app, queues=queue, concurrency=1, burst=True)
        thread = threading.Thread(target=worker.run)
        thread.start()
        thread.join(timeout=60)
        assert not thread.is_alive(), f"the burst worker of {queue} did not finish"


def finish_turns(url: str, *, flood: int, victims: dict[str, str], jobs: int) -> dict[str, int]:
    """Each victim's jobs served by one worker per shard (concurrency 1, in threads): how many
    jobs its busiest shard's worker started before and including its last one (its "turns")."""
    starts = Starts()
    app, work = sharded_app(url, starts)
    try:
        ids = {("flood", n): work.enqueue("flood", n) for n in range(flood)}
        for tenant in victims.values():
            ids.update({(tenant, n): work.enqueue(tenant, n) for n in range(jobs)})
        queue_of = {key: app.job_info(job_id).queue for key, job_id in ids.items()}  # type: ignore[union-attr]
        drain(app, [f"imports@{i}" for i in range(N)])
        assert len(starts.seen) == len(ids)
        per_shard: dict[str, list[tuple[str, int]]] = {}
        for key in starts.seen:
            per_shard.setdefault(queue_of[key], []).append(key)
        turns: dict[str, int] = {}
        for role, tenant in victims.items():
            turns[role] = max(
                max(at for at, (who, _) in enumerate(order, 1) if who == tenant)
                for order in per_shard.values()
                if any(who == tenant for who, _ in order)
            )
        return turns
    finally:
        app.close()


def test_a_flood_slows_the_tenants_that_share_its_shards_and_no_one_else(
    fresh_url: Callable[[], str],
) -> None:
    """12 jobs each of three tenants, one pool (one worker) per shard. Alone, each tenant's
    jobs alternate over its two shards: done after 6 turns of its pools. With 400 jobs of a
    flooding tenant enqueued first, a tenant with none of its shards is exactly as fast; one with
    both gets its fair half of each (12 turns); one with a single shard in common puts two of
    every three jobs in its quiet shard and keeps half of the shared one (8 turns)."""
    alone, flooded = {}, {}
    for role, tenant in pick_tenants().items():
        alone[role] = finish_turns(fresh_url(), flood=0, victims={role: tenant}, jobs=12)[role]
        flooded[role] = finish_turns(fresh_url(), flood=400, victims={role: tenant}, jobs=12)[role]
    assert alone == {"twin": 6, "neighbour": 6, "stranger": 6}
    assert flooded == {"twin": 12, "neighbour": 8, "stranger": 6}


def test_an_assignment_isolates_a_tenant(url: str) -> None:
    starts = Starts()
    app, work = sharded_app(url, starts, assign={"bigco": [7]})
    try:
        queues = {app.job_info(work.enqueue("bigco", n)).queue for n in range(5)}  # type: ignore[union-attr]
        assert queues == {"imports@7"}
    finally:
        app.close()


def test_the_same_shards_after_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    chosen = []
    for _ in range(2):  # a new App (as a new process would) on the same store
        app, work = sharded_app(url, Starts())
        try:
            chosen.append({app.job_info(work.enqueue(f"t{n}", 0)).queue for n in range(20)})  # type: ignore[union-attr]
        finally:
            app.close()
    assert chosen[0] == chosen[1]


def test_waiting_jobs_stay_and_are_served_when_the_shard_count_changes(tmp_path: Path) -> None:
    """From 8 shards to 12: waiting jobs stay in their shard, which the new count still has, and
    a worker of the new declaration serves them. From 8 to 4: jobs in shards 4 to 7 stay there
    (nothing is moved or lost) and are served by a worker that names them."""
    url = f"sqlite:///{tmp_path}/s.db"
    app, work = sharded_app(url, Starts())
    ids = [work.enqueue(f"t{n}", n) for n in range(40)]
    before = {i: app.job_info(i).queue for i in ids}  # type: ignore[union-attr]
    app.close()
    assert {int(q.split("@")[1]) for q in before.values()} > set(range(4))  # some in 4..7

    grown = App(url)
    grown.queue("imports", shards=12, shard_size=K)
    grown.job(name="work", queue="imports", tenant="tenant")(lambda tenant, n: None)
    drain(grown, [str(grown.queue_order())])
    assert all(grown.job_info(i).state is JobState.SUCCEEDED for i in ids)  # type: ignore[union-attr]
    assert {i: grown.job_info(i).queue for i in ids} == before  # type: ignore[union-attr]
    grown.close()


def test_shrinking_keeps_the_jobs_of_dropped_shards(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    app, work = sharded_app(url, Starts())
    ids = [work.enqueue(f"t{n}", n) for n in range(40)]
    app.close()
    shrunk = App(url)
    shrunk.queue("imports", shards=4, shard_size=K)
    shrunk.job(name="work", queue="imports", tenant="tenant")(lambda tenant, n: None)
    drain(shrunk, [str(shrunk.queue_order())])
    left = [i for i in ids if shrunk.job_info(i).state is JobState.READY]  # type: ignore[union-attr]
    assert left and all(int(shrunk.job_info(i).queue.split("@")[1]) >= 4 for i in left)  # type: ignore[union-attr]
    old = ",".join(f"imports@{i}" for i in range(4, 8))
    drain(shrunk, [old])
    assert all(shrunk.job_info(i).state is JobState.SUCCEEDED for i in ids)  # type: ignore[union-attr]
    shrunk.close()


def test_stats_show_each_shard_as_a_queue(url: str) -> None:
    app, work = sharded_app(url, Starts())
    try:
        for n in range(4):
            work.enqueue("acme", n)
        rows = app.backend.stats(StatsParams(queue=None))
        assert {(r.queue, r.ready) for r in rows} == {
            (f"imports@{i}", 2) for i in tenant_shards("imports", "acme", N, K)
        }
    finally:
        app.close()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"shards": 0}, "shards must be a whole number of at least 1"),
        ({"shards": 4, "shard_size": 5}, "shard_size=5 is more than shards=4"),
        ({"shards": 4, "shard_size": 0}, "shard_size must be a whole number of at least 1"),
        ({"shards": 4, "assign": {"big": [4]}}, "names shard 4, but the queue has shards 0 to 3"),
        ({"assign": {"big": [0]}}, "assign needs shards=n too"),
        ({"shards": 4, "strict": True}, "cannot be both strict and sharded"),
    ],
)
def test_bad_settings_are_refused_at_the_declaration(
    settings: dict[str, object], message: str
) -> None:
    app = App("memory://")
    with pytest.raises(ConfigError, match=message):
        app.queue("imports", **settings)  # type: ignore[arg-type]
    assert "imports" not in app.queues  # nothing half-declared


def test_a_shard_name_cannot_be_declared() -> None:
    with pytest.raises(ConfigError, match="'@' is kept for the shards"):
        App("memory://").queue("imports@1")


def test_throttle_rules_and_shards_do_not_mix() -> None:
    app = App("memory://")
    app.queue("slow")
    app.queue("imports", shards=4)
    with pytest.raises(ConfigError, match="sharded queue takes no throttle rules"):
        app.job(name="a", queue="imports", throttle=[Throttle(1, 60.0, "slow")])(lambda: None)

    def export(cursor: int | None, t: str) -> Iterator[int]:
        yield 1

    with pytest.raises(ConfigError, match="sharded queue takes no throttle rules"):
        app.iterative_job(name="b", queue="imports", throttle=[Throttle(1, 60.0, "slow")])(export)
    other = App("memory://")
    other.queue("slow")
    other.job(name="a", queue="imports", throttle=[Throttle(1, 60.0, "slow")])(lambda: None)
    with pytest.raises(ConfigError, match="cannot be sharded"):
        other.queue("imports", shards=4)


def test_worker_order_of_chosen_shards() -> None:
    app = App("memory://")
    app.queue("imports", shards=8)
    app.queue("other")
    assert app.queue_order("0-2,6").queues == [
        "imports@0", "imports@1", "imports@2", "imports@6", "other",
    ]  # fmt: skip
    assert app.queue_order().queues[:3] == ["imports", "imports@0", "imports@1"]


def run_worker(*args: str) -> click.testing.Result:
    return click.testing.CliRunner().invoke(cli, ["worker", *args])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shards", "0-8"], "queue 'imports' has shards 0 to 7, not 8; name shards in that"),
        (["--shards", "5-2"], "runs backwards"),
        (["--shards", "x"], "'x' is not a shard number or range"),
        (["--shards", "0", "--queues", "imports@0"], "name the shards themselves instead"),
    ],
)
def test_bad_worker_shards_are_clear(args: list[str], message: str) -> None:
    result = run_worker("tests.worker.shard_app:app", "--url", "memory://", *args)
    assert result.exit_code == 2
    assert message in result.output


def test_shards_need_a_sharded_queue() -> None:
    result = run_worker("tests.worker.apps:app", "--url", "memory://", "--shards", "0")
    assert result.exit_code == 2
    assert "declares no sharded queue" in result.output
