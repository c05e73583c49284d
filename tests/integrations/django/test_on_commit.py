"""Stores that cannot join Django's transaction (SQLite, Redis here): the job is checked and
given its id at the call, stored after Django's transaction commits, never when it rolls
back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from conformance.conftest import BACKENDS
from django.db import transaction

from fairq import App
from fairq.errors import ConfigError, MissingTenant
from fairq.integrations.django import enqueue, enqueue_many, in_transaction


@pytest.fixture(params=["sqlite", "redis"])
def other(request: pytest.FixtureRequest, tmp_path: Path, shop: ModuleType) -> Iterator[App]:
    backend = BACKENDS[request.param](tmp_path)
    app = App("memory://", backend=backend)

    @app.job(tenant="shop", name="tests.notify")
    def notify(order_id: int, shop: str) -> None: ...

    yield app
    app.close()


class Declined(Exception):
    pass


def test_job_is_stored_after_the_commit(other: App) -> None:
    from shop.models import Order

    notify = other.jobs["tests.notify"]
    assert in_transaction(other) is None
    with transaction.atomic():
        order = Order.objects.create(shop="acme", total=3)
        job_id = enqueue(notify, order.id, shop="acme")
        assert other.job_info(job_id) is None  # not before the commit
    info = other.job_info(job_id)
    assert info is not None and info.tenant == "acme"


def test_job_is_dropped_on_rollback(other: App) -> None:
    from shop.models import Order

    notify = other.jobs["tests.notify"]
    with pytest.raises(Declined), transaction.atomic():
        order = Order.objects.create(shop="globex", total=3)
        ids = enqueue_many([notify.call(order.id, shop="globex")], app=other)
        raise Declined
    assert other.job_info(ids[0]) is None
    assert other.stats() == []


def test_bad_input_raises_at_the_call(other: App) -> None:
    notify = other.jobs["tests.notify"]
    with transaction.atomic(), pytest.raises(MissingTenant):
        enqueue(notify, 1, shop=None)
    assert other.stats() == []


def test_a_function_that_is_not_a_job_is_refused_naming_the_fix(other: App) -> None:
    def plain(order_id: int) -> None: ...

    with pytest.raises(ConfigError, match=r"not a fairq job.*@app.job"):
        enqueue(plain, 1)  # type: ignore[arg-type]
    assert other.stats() == []
