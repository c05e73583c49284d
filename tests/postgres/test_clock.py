"""The time of an event is the time the store performs it; a crash is not consumption.

With ``?clock=store`` (the default) every event takes the later of the caller's ``now`` and
the server's clock once its locks are held, so a call sent again after an outage, or kept
waiting for a queue's lock, hands out a lease with its whole ``lease_timeout`` ahead of it. The
bounds are built from reads of the server's clock taken around the call, never from timings.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from fairq.contract import DequeueParams, EnqueueParams, MaintainParams, StatsParams
from fairq.job import Lease

from ._store import CALLER_CLOCK, DisposableBackend, fresh_schema, open_disposable, server_url
from .helpers import Q, new_job

LEASE = 2.0
WAIT = 60.0  # safety limit for every wait on an event


def server_clock() -> float:
    with psycopg.connect(server_url()) as conn:
        row = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
    assert row is not None
    return float(row[0])


class OutageProxy:
    """A TCP proxy to the test server that can have an outage: ``down`` cuts every connection
    it carries and closes each new one at once (``refused`` is set when one was), until
    ``restore``."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.refused = threading.Event()
        self._up = threading.Event()
        self._up.set()
        self._carried: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._up.is_set():
                client.close()
                self.refused.set()
                continue
            upstream = socket.create_connection(self.upstream)
            with self._lock:
                self._carried += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()

    def down(self) -> None:
        self._up.clear()
        with self._lock:
            carried, self._carried = self._carried, []
        for sock in carried:
            _close(sock)

    def restore(self) -> None:
        self._up.set()

    def close(self) -> None:
        self.down()
        self._listener.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    while True:
        try:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
        except OSError:
            break
    _close(source)
    _close(sink)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@pytest.fixture
def proxy() -> Iterator[OutageProxy]:
    parts = psycopg.conninfo.conninfo_to_dict(server_url())
    cutter = OutageProxy((str(parts.get("host", "127.0.0.1")), int(parts.get("port", 5432))))
    yield cutter
    cutter.close()


def in_thread(call: Any) -> tuple[threading.Thread, list[Any]]:
    """Run ``call`` in a thread; its result (or exception) lands in the list."""
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as exc:  # reported by the test
            result.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def one_lease(thread: threading.Thread, result: list[Any]) -> Lease:
    thread.join(WAIT)
    assert not thread.is_alive()
    (leases,) = result
    assert not isinstance(leases, BaseException), leases
    (lease,) = leases
    assert isinstance(lease, Lease)
    return lease


def assert_started_within(lease: Lease, earliest: float, latest: float) -> None:
    """The lease began while the store performed the dequeue, with its whole timeout ahead."""
    assert earliest <= lease.started_at <= latest
    assert lease.deadline == lease.started_at + LEASE


def test_a_dequeue_sent_again_after_an_outage_leases_from_the_time_it_runs(
    proxy: OutageProxy,
) -> None:
    parts = psycopg.conninfo.conninfo_to_dict(server_url())
    url = f"postgresql://{parts.get('user', 'postgres')}@127.0.0.1:{proxy.port}/{parts['dbname']}"
    store = DisposableBackend(url, schema=fresh_schema())
    try:
        store.enqueue(EnqueueParams(jobs=[new_job(0, lease=LEASE)], now=time.time()))
        sent = time.time()
        proxy.down()
        params = DequeueParams(queues=[Q], worker_id="w", now=sent)
        thread, result = in_thread(lambda: store.dequeue(params).leases)
        assert proxy.refused.wait(WAIT)  # the call is in its reconnect loop
        outage_over = server_clock()
        proxy.restore()
        lease = one_lease(thread, result)
        assert_started_within(lease, outage_over, server_clock())
    finally:
        proxy.restore()
        store.close()


@pytest.fixture
def store_clocked() -> Iterator[DisposableBackend]:
    backend = open_disposable(clock="store")
    yield backend
    backend.close()


def test_a_dequeue_that_waited_for_the_queue_lock_leases_from_when_it_got_it(
    store_clocked: DisposableBackend,
) -> None:
    store = store_clocked
    store.enqueue(EnqueueParams(jobs=[new_job(0, lease=LEASE)], now=time.time()))
    with psycopg.connect(server_url()) as holder:
        # a dispatch in progress elsewhere: the queue's exclusive lock, held until commit
        holder.execute(
            store.q["lock_queues_exclusive"],
            {"names": [Q], "seed": store.seed, "now": 0.0},
        ).fetchall()
        params = DequeueParams(queues=[Q], worker_id="w", now=time.time())
        thread, result = in_thread(lambda: store.dequeue(params).leases)
        waiting = f"""SELECT count(*) FROM pg_stat_activity
            WHERE wait_event_type = 'Lock' AND query LIKE '%"{store.schema}".dequeue(%'"""
        give_up = time.monotonic() + WAIT
        with psycopg.connect(server_url(), autocommit=True) as watcher:  # a fresh view each time
            while watcher.execute(waiting).fetchone() != (1,):  # wait for the event: it waits
                assert time.monotonic() < give_up, "the dequeue never waited for the lock"
        lock_released = server_clock()
        holder.commit()
    lease = one_lease(thread, result)
    assert_started_within(lease, lock_released, server_clock())


def test_a_caller_clock_keeps_the_now_it_is_given(pg: DisposableBackend) -> None:
    pg.enqueue(EnqueueParams(jobs=[new_job(0, lease=LEASE)], now=1.0))
    (lease,) = pg.dequeue(DequeueParams(queues=[Q], worker_id="w", now=2.0)).leases
    assert (lease.started_at, lease.deadline) == (2.0, 2.0 + LEASE)


def tenant_row(backend: DisposableBackend, tenant: str) -> tuple[float, float, float]:
    with psycopg.connect(server_url(), **CALLER_CLOCK) as conn:
        row = conn.execute(
            f'SELECT finish_tag, usage, usage_at FROM "{backend.schema}".tenants WHERE tenant = %s',
            (tenant,),
        ).fetchone()
    assert row is not None
    return (float(row[0]), float(row[1]), float(row[2]))


def test_an_expired_lease_charges_its_tenant_the_estimate_not_the_lease(
    pg: DisposableBackend,
) -> None:
    """A worker killed mid-job (its lease of 60 s expires) costs its tenant what the run was
    charged at dispatch (the estimate, 1 s), exactly as if nothing happened after it: F and
    usage stay as the dispatch left them; the job is ready again with one failed attempt."""
    pg.enqueue(EnqueueParams(jobs=[new_job(0, lease=60.0), new_job(1, lease=60.0)], now=0.0))
    (lease,) = pg.dequeue(DequeueParams(queues=[Q], worker_id="w", now=0.0)).leases
    charged_at_dispatch = tenant_row(pg, "a")
    assert charged_at_dispatch == (1.0, 1.0, 0.0)  # F = S + estimate / w, usage alike
    assert len(pg.maintain(MaintainParams(now=61.0)).expired) == 1
    assert tenant_row(pg, "a") == charged_at_dispatch
    (stats,) = pg.stats(StatsParams(queue=Q, tenant="a", now=61.0))
    assert (stats.ready, stats.running, stats.failed) == (2, 0, 1)
    (again,) = pg.dequeue(DequeueParams(queues=[Q], worker_id="w", now=62.0)).leases
    assert again.job_id == lease.job_id  # it kept its place: the head of its tenant
