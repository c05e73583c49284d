"""Settings for the whole suite.

Under pytest-xdist (``./dev test`` runs three test processes: ``-n 3``), each test process gets
its own Redis databases, so one process's FLUSHDB never empties another's: ``gw0`` keeps the
defaults (tests in database 9, brokers in 10), ``gw1`` uses 14 and 15, ``gw2`` 11 and 12,
``gw3`` 7 and 8; more processes than that are refused. Each process starts its own local Redis
Cluster (tests/redis_cluster/servers.py) from a port range of its own (7100, 7300, …; or from
``$FAIRQ_TEST_CLUSTER_PORT`` on, 200 apart). Set before any test module reads them (modules
read the variables at import), and inherited by the processes tests start.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

_DATABASES = {"gw1": (14, 15), "gw2": (11, 12), "gw3": (7, 8)}


def _with_database(url: str, database: int) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


def _own_databases() -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    if worker == "gw0":
        return
    if worker not in _DATABASES:
        raise RuntimeError(
            f"tests/conftest.py has Redis databases for 4 test processes, not {worker}: "
            "run pytest with -n 4 or fewer, or add databases to _DATABASES"
        )
    tests_db, broker_db = _DATABASES[worker]
    # the local Redis Cluster of tests/redis_cluster: a port range of its own per process,
    # counted from $FAIRQ_TEST_CLUSTER_PORT when it is set
    number = int(worker.removeprefix("gw"))
    first = int(os.environ.get("FAIRQ_TEST_CLUSTER_PORT", "7100"))
    os.environ["FAIRQ_TEST_CLUSTER_PORT"] = str(first + 200 * number)
    tests = os.environ.get("FAIRQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
    broker = os.environ.get("FAIRQ_TEST_BROKER_URL", "redis://127.0.0.1:6379/10")
    os.environ["FAIRQ_TEST_REDIS_URL"] = _with_database(tests, tests_db)
    os.environ["FAIRQ_TEST_BROKER_URL"] = _with_database(broker, broker_db)


_own_databases()
