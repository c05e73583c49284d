"""RQ's no-op job (imported by ``rq worker``)."""

from _drive import counter, mark_done

_client = counter()


def noop(tenant: str) -> None:
    mark_done(_client)
