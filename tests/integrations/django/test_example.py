"""The Django example, run: its view enqueues a receipt job inside ``transaction.atomic()`` on
Django's own PostgreSQL connection. Commit: the order and the job exist, and a real
``fairq worker`` process runs the job (the order's receipt is marked sent). Rollback: neither
exists."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from django.db import connection, transaction
from django.test import Client

from fairq import JobState
from fairq.errors import JobArgumentsError
from fairq.integrations.django import enqueue, in_transaction

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "django"


def test_commit_stores_the_order_and_a_worker_process_runs_its_job(
    shop: ModuleType, shop_env: dict[str, str]
) -> None:
    from shop.models import Order

    response = Client().post("/orders", {"shop": "acme", "total": "30"})
    assert response.status_code == 200, response.content
    body = response.json()
    info = shop.app.job_info(body["job"])
    assert info is not None and (info.tenant, info.queue) == ("acme", "receipts")
    assert Order.objects.filter(id=body["order"], shop="acme", receipt_sent=False).exists()

    # the README's worker command, as a process of its own (it sets Django up first)
    worker = subprocess.run(
        [sys.executable, "-m", "fairq", "worker", "shop.jobs:app", "--burst"],
        cwd=EXAMPLE,
        env={**os.environ, **shop_env, "PYTHONPATH": str(EXAMPLE)},
        capture_output=True,
        timeout=120,
    )
    assert worker.returncode == 0, worker.stderr.decode()[-2000:]
    info = shop.app.job_info(body["job"])
    assert info is not None and info.state is JobState.SUCCEEDED
    assert Order.objects.filter(id=body["order"], receipt_sent=True).exists()


def test_rollback_leaves_neither_order_nor_job(shop: ModuleType) -> None:
    from shop.models import Order

    response = Client().post("/orders", {"shop": "globex", "total": "5", "decline": "1"})
    assert response.status_code == 402, response.content
    assert shop.app.job_info(response.json()["job"]) is None
    assert not Order.objects.filter(shop="globex").exists()


def test_the_job_is_written_in_djangos_transaction(shop: ModuleType) -> None:
    """Before the commit, Django's connection sees the job's row and fairq's own
    connections do not: it is in Django's transaction, not deferred to its commit."""
    from shop.models import Order

    assert in_transaction(shop.app) is not None
    schema = shop.app.backend.schema
    with transaction.atomic():
        order = Order.objects.create(shop="hooli", total=1)
        job_id = enqueue(shop.send_receipt, order.id, shop="hooli")
        with connection.cursor() as cur:
            cur.execute(f'SELECT count(*) FROM "{schema}".inbox WHERE id = %s', [job_id])
            assert cur.fetchone() == (1,)
        assert shop.app.job_info(job_id) is None
    assert shop.app.job_info(job_id) is not None


def test_bad_input_raises_at_the_call_and_the_transaction_goes_on(shop: ModuleType) -> None:
    from shop.models import Order

    with transaction.atomic():
        order = Order.objects.create(shop="initech", total=1)
        with pytest.raises(JobArgumentsError):
            enqueue(shop.send_receipt, object(), shop="initech")
        job_id = enqueue(shop.send_receipt.options(priority=2), order.id, shop="initech")
    info = shop.app.job_info(job_id)
    assert info is not None and info.priority == 2
    assert Order.objects.filter(shop="initech").count() == 1
