"""Celery's no-op task; the broker is the benchmark Redis, results are not stored."""

from _drive import URL, counter, mark_done
from _flood import run_job
from celery import Celery

app = Celery("celery_jobs", broker=URL)
app.conf.update(task_ignore_result=True, worker_hijack_root_logger=False)
_client = counter()


@app.task
def noop(tenant: str) -> None:
    mark_done(_client)


@app.task
def stamp(tenant: str, enqueued_at: float) -> None:
    run_job(_client, tenant, enqueued_at)
