"""Bad input: every async call refuses what its blocking twin refuses, with the same error
(type and message), before the store is touched; nothing stored changes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from fairq import App
from fairq.errors import (
    ConfigError,
    InvalidTenant,
    JobArgumentsError,
    MissingTenant,
    PayloadTooLarge,
    UnknownJob,
)

from .conftest import run

AppFactory = Callable[..., App]
# (what is wrong, the error, the blocking call, the async call): each given the App
Case = tuple[str, type[Exception], Callable[[App], Any], Callable[[App], Awaitable[Any]]]


def work(app: App) -> Any:
    return app.jobs["tests.work"]


CASES: list[Case] = [
    ("args not a list", JobArgumentsError,
     lambda a: a.enqueue("tests.work", "acme"), lambda a: a.aenqueue("tests.work", "acme")),
    ("not JSON", JobArgumentsError,
     lambda a: work(a).enqueue("acme", object()), lambda a: work(a).aenqueue("acme", object())),
    ("NaN", JobArgumentsError,
     lambda a: work(a).enqueue("acme", float("nan")),
     lambda a: work(a).aenqueue("acme", float("nan"))),
    ("arguments do not fit", JobArgumentsError,
     lambda a: work(a).enqueue("acme"), lambda a: work(a).aenqueue("acme")),
    ("no tenant", MissingTenant,
     lambda a: work(a).enqueue(None, 1), lambda a: work(a).aenqueue(None, 1)),
    ("bad tenant", InvalidTenant,
     lambda a: work(a).enqueue(["x"], 1), lambda a: work(a).aenqueue(["x"], 1)),
    ("negative delay", ConfigError,
     lambda a: work(a).options(delay=-1).enqueue("acme", 1),
     lambda a: work(a).options(delay=-1).aenqueue("acme", 1)),
    ("delay and run_at", ConfigError,
     lambda a: work(a).options(delay=1, run_at=2.0).enqueue("acme", 1),
     lambda a: work(a).options(delay=1, run_at=2.0).aenqueue("acme", 1)),
    ("bad queue name", ConfigError,
     lambda a: work(a).options(queue="no spaces").enqueue("acme", 1),
     lambda a: work(a).options(queue="no spaces").aenqueue("acme", 1)),
    ("bad headers", Exception,
     lambda a: work(a).options(headers={"k": 1}).enqueue("acme", 1),
     lambda a: work(a).options(headers={"k": 1}).aenqueue("acme", 1)),
    ("too large", PayloadTooLarge,
     lambda a: work(a).enqueue("acme", "x" * 600), lambda a: work(a).aenqueue("acme", "x" * 600)),
    ("unknown job", UnknownJob,
     lambda a: a.enqueue("tests.none"), lambda a: a.aenqueue("tests.none")),
    ("negative weight", ConfigError,
     lambda a: a.set_tenant("default", "acme", weight=-1),
     lambda a: a.aset_tenant("default", "acme", weight=-1)),
    ("bad rate", ConfigError,
     lambda a: a.set_tenant("default", "acme", rate="lots"),
     lambda a: a.aset_tenant("default", "acme", rate="lots")),
    ("empty tenant", InvalidTenant,
     lambda a: a.set_tenant("default", ""), lambda a: a.aset_tenant("default", "")),
    ("zero in flight", ConfigError,
     lambda a: a.set_queue("default", max_in_flight=0),
     lambda a: a.aset_queue("default", max_in_flight=0)),
    ("unique key without a window", ConfigError,
     lambda a: work(a).options(unique_key="k").enqueue("acme", 1),
     lambda a: work(a).options(unique_key="k").aenqueue("acme", 1)),
    ("result of no id", ConfigError, lambda a: a.result(""), lambda a: a.aresult("")),
    ("negative timeout", ConfigError,
     lambda a: a.result("x", timeout=-1), lambda a: a.aresult("x", timeout=-1)),
    ("cancel of a str", ConfigError,
     lambda a: a.cancel_many("abc"), lambda a: a.acancel_many("abc")),
    ("cancel of None", ConfigError,
     lambda a: a.cancel_many(None), lambda a: a.acancel_many(None)),
    ("stats of a bad tenant", InvalidTenant,
     lambda a: a.stats(tenant=""), lambda a: a.astats(tenant="")),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_async_call_refuses_as_blocking_call(make_app: AppFactory, case: Case) -> None:
    _, error, blocking, awaited = case
    app = make_app(max_payload_bytes=512)

    @app.job(tenant="account", name="tests.work")
    def work_fn(account: str, n: int) -> None: ...

    work_fn.enqueue("acme", 0)  # something stored, which a bad call must leave as it was
    before = app.stats()
    with pytest.raises(error) as refused:
        blocking(app)

    async def scenario() -> None:
        with pytest.raises(type(refused.value)) as again:
            await awaited(app)
        assert str(again.value) == str(refused.value)

    run(app, scenario)
    assert app.stats() == before


def test_async_call_outside_a_loop_is_a_coroutine_not_a_call(make_app: AppFactory) -> None:
    """Calling an async method without awaiting it does nothing (Python's own rule): the
    store holds no job. Awaited, it enqueues."""
    app = make_app()

    @app.job(tenant="account", name="tests.work")
    def work_fn(account: str, n: int) -> None: ...

    pending = work_fn.aenqueue("acme", 1)
    assert app.stats() == []
    asyncio.run(_close_after(app, pending))
    assert [row.ready for row in app.stats()] == [1]


async def _close_after(app: App, pending: Awaitable[Any]) -> None:
    try:
        await pending
    finally:
        await app.aclose(blocking=False)
