"""The producer side of fair Celery tasks, in this process: what ``.delay()`` stores, and the
errors a bad call or declaration gets (no broker, no worker: nothing is sent)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from celery import Celery

from fairq import JobState, Throttle
from fairq.errors import ConfigError, JobArgumentsError, MissingTenant
from fairq.integrations.celery import FairCelery
from fairq.job import Lease, decode_payload
from fairq.relay import UnknownTask

from .conftest import ROOT


@pytest.fixture
def fair(tmp_path: Path) -> Iterator[FairCelery]:
    celery_app = Celery("calls", broker="redis://127.0.0.1:1/0", set_as_current=False)
    made = FairCelery(celery_app, url=f"sqlite:///{tmp_path / 'q.db'}")
    yield made
    made.app.close()


def test_delay_stores_the_job_in_fairq_under_the_celery_task_id(fair: FairCelery) -> None:
    @fair.celery.task(base=fair.Task, name="t.imp", shared=False, fair_tenant="account_id")
    def imp(account_id: str, path: str, rows: int = 0) -> None: ...

    result = imp.delay("acme", "a.csv", rows=3)  # the broker is unreachable: nothing is sent
    info = fair.app.job_info(result.id)
    assert info is not None
    assert (info.name, info.queue, info.tenant, info.state) == (
        "t.imp",
        "celery",
        "acme",
        JobState.READY,
    )
    assert decode_payload(info.payload) == (["acme", "a.csv"], {"rows": 3})


def test_apply_async_options_become_fairq_options(fair: FairCelery) -> None:
    @fair.task(name="t.rep", shared=False, tenant="account_id", queue="reports")
    def rep(account_id: str) -> None: ...

    now = datetime.now(timezone.utc)
    other = rep.apply_async(("acme",), tenant="globex", queue="urgent").id
    later = rep.apply_async(("acme",), countdown=60).id
    at = rep.apply_async(("acme",), eta=now + timedelta(hours=1)).id
    naive = rep.apply_async(("acme",), eta=(now + timedelta(hours=2)).replace(tzinfo=None)).id
    text = rep.apply_async(("acme",), eta=(now + timedelta(hours=3)).isoformat()).id
    infos = {job_id: fair.app.job_info(job_id) for job_id in (other, later, at, naive, text)}
    assert all(info is not None for info in infos.values())
    assert (infos[other].tenant, infos[other].queue) == ("globex", "urgent")  # type: ignore[union-attr]
    assert infos[later].run_at >= now.timestamp() + 60  # type: ignore[union-attr]
    assert infos[at].run_at == pytest.approx((now + timedelta(hours=1)).timestamp())  # type: ignore[union-attr]
    # a naive eta is in the app's timezone, UTC by default, as Celery reads it
    assert infos[naive].run_at == pytest.approx((now + timedelta(hours=2)).timestamp())  # type: ignore[union-attr]
    assert infos[text].run_at == pytest.approx((now + timedelta(hours=3)).timestamp())  # type: ignore[union-attr]
    assert {i.state for i in infos.values() if i is not None} == {
        JobState.READY,
        JobState.SCHEDULED,
    }


def test_a_call_with_no_tenant_fails_at_the_call(fair: FairCelery) -> None:
    @fair.celery.task(base=fair.Task, name="t.one", shared=False, fair_tenant="account_id")
    def one(account_id: str | None) -> None: ...

    @fair.celery.task(base=fair.Task, name="t.two", shared=False)
    def two(x: int) -> None: ...

    with pytest.raises(MissingTenant, match=r"fair task 't.one' has no tenant.*fair_tenant="):
        one.delay(None)
    with pytest.raises(MissingTenant, match=r"fair task 't.two' has no tenant.*tenant=…"):
        two.delay(1)
    assert two.apply_async((1,), tenant="acme").id  # a tenant given at the call is enough
    assert fair.app.stats() and sum(s.ready for s in fair.app.stats()) == 1


def test_bad_calls_and_declarations_are_refused_clearly(fair: FairCelery) -> None:
    @fair.task(name="t.three", shared=False, tenant="account_id")
    def three(account_id: str) -> None: ...

    with pytest.raises(ConfigError, match=r"option\(s\) link cannot be used.*links are not"):
        three.apply_async(("acme",), link=three.s("x"))
    with pytest.raises(ConfigError, match=r"expires, priority cannot be used.*Supported"):
        three.apply_async(("acme",), priority=3, expires=10)
    with pytest.raises(ConfigError, match="give countdown or eta, not both"):
        three.apply_async(("acme",), countdown=1, eta=datetime.now(timezone.utc))
    with pytest.raises(JobArgumentsError, match=r"arguments do not fit job 't\.three'"):
        three.delay("acme", "extra")
    with pytest.raises(ConfigError, match="takes no argument 'acount_id'"):
        bad = fair.celery.task(base=fair.Task, name="t.bad", shared=False, fair_tenant="acount_id")

        @bad
        def typo(account_id: str) -> None: ...

        typo.delay("acme")  # Celery makes a task lazily; at the latest here
    with pytest.raises(ConfigError, match="drop base="):
        fair.task(base=fair.Task)
    assert fair.app.stats() == []  # nothing stored by any of them


def test_bound_tasks_eager_runs_and_direct_calls_run_as_celery_does(fair: FairCelery) -> None:
    @fair.task(name="t.bound", shared=False, bind=True, tenant="account_id")
    def bound(self: object, account_id: str, n: int) -> int:
        return n * 2

    assert bound("acme", 4) == 8  # a direct call runs here
    stored = bound.delay("acme", 1)  # `self` is not one of the job's arguments
    assert fair.app.job_info(stored.id) is not None
    fair.celery.conf.task_always_eager = True
    assert bound.delay("acme", 5).get() == 10  # eager: runs here, nothing stored
    assert sum(s.ready for s in fair.app.stats()) == 1


def test_relay_queues_and_the_publishers_refusals(fair: FairCelery) -> None:
    fair.app.queue("slow")

    @fair.task(
        name="t.q", shared=False, tenant="t", queue="bulk", throttle=[Throttle(5, 60, "slow")]
    )
    def q(t: str) -> None: ...

    @fair.celery.task(name="t.plain", shared=False)
    def plain(t: str) -> None: ...

    assert fair.relay_queues() == ["bulk", "slow"]
    publisher = fair.publisher()

    def lease(name: str, payload: str = '{"args":["acme"],"kwargs":{}}') -> Lease:
        return Lease(
            token="tok", job_id="j", name=name, queue="bulk", tenant="acme", payload=payload,
            attempt=1, max_attempts=3, started_at=0.0, deadline=60.0, lease_timeout=60.0,
            cost=1.0, ready_at=0.0,
        )  # fmt: skip

    with pytest.raises(UnknownTask, match=r"no Celery task named 't\.gone'"):
        publisher.publish(lease("t.gone"))
    with pytest.raises(UnknownTask, match=r"'t\.plain' is not a fair task"):
        publisher.publish(lease("t.plain"))
    with pytest.raises(UnknownTask, match=r"'t\.q' no longer takes these arguments"):
        publisher.publish(lease("t.q", '{"args":["acme", 1],"kwargs":{}}'))


def test_core_fairq_does_not_import_celery_and_the_integration_names_its_extra() -> None:
    core = "import sys, fairq, fairq.relay, fairq.cli.relay; assert 'celery' not in sys.modules"
    subprocess.run([sys.executable, "-c", core], cwd=ROOT, check=True)
    missing = (
        "import sys; sys.modules['celery'] = None\n"
        "try:\n    import fairq.integrations.celery\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", missing], cwd=ROOT, check=True, capture_output=True, text=True
    )
    assert "pip install 'fairq[celery]'" in out.stdout


def test_a_plain_task_s_tenant_function_reads_the_call_as_a_fair_task_s_does(
    fair: FairCelery,
) -> None:
    """``fair_tenant=<function>`` on a task the router throttles gets the call's arguments,
    and one that raises is explained as the App explains it (fairq.app.checks.tenant_by_rule)."""
    fair.app.queue("slow")

    @fair.celery.task(
        name="t.plain", shared=False, fair_tenant=lambda report: report["org"],
        fair_queue="home", fair_throttle=[Throttle(1, 60, "slow")],
    )  # fmt: skip
    def plain(report: dict[str, str]) -> None: ...

    task = fair.celery.tasks["t.plain"]
    routes = [fair.router("t.plain", ({"org": "acme"},), {}, {}, task=task) for _ in range(2)]
    assert routes == [{"queue": "home"}, {"queue": "slow"}]  # acme's second call throttled
    explained = r"task 't\.plain' has no tenant: its tenant function raised KeyError: 'org'; pass"
    with pytest.raises(MissingTenant, match=explained) as raised:
        fair.router("t.plain", ({"name": "q3"},), {}, {}, task=task)
    assert isinstance(raised.value.__cause__, KeyError)
