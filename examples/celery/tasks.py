"""A Celery project with one fair task: each account's reports get a fair share of the workers.

Run from this directory (see README.md)::

    celery -A tasks worker --concurrency 4 --prefetch-multiplier 1
    fairq relay tasks:fair --in-flight 4
"""

from __future__ import annotations

import logging
import os

from celery import Celery

from fairq.integrations.celery import FairCelery

celery_app = Celery(
    "reports", broker=os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
)
celery_app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    task_acks_late=True,  # a message is acked when its task ends, not when it is received
    worker_prefetch_multiplier=1,  # a worker holds no more messages than it runs
)
fair = FairCelery(celery_app, url=os.environ.get("FAIRQ_URL", "sqlite:///fairq.db"))

log = logging.getLogger(__name__)


# An explicit name: it is what fairq stores with each waiting job, so it must not change with
# the module's import path.
@celery_app.task(
    base=fair.Task, name="reports.build_report", fair_tenant="account_id", fair_max_attempts=5
)
def build_report(account_id: str, report: str, rows: int = 100) -> str:
    """Stands in for real work (a CSV import, a PDF, a call to an LLM)."""
    total = sum(range(rows))
    log.info("report %s for account %s: %d", report, account_id, total)
    return f"{account_id}/{report}: {total}"
