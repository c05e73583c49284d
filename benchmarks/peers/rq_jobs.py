"""RQ's no-op job (imported by ``rq worker``)."""

from _drive import counter, mark_done
from _flood import run_job

_client = counter()


def noop(tenant: str) -> None:
    mark_done(_client)


def stamp(tenant: str, enqueued_at: float) -> None:
    run_job(_client, tenant, enqueued_at)
