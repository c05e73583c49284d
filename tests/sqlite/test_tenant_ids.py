"""Tenant ids are arbitrary strings: stored exactly, never confused with one another."""

from __future__ import annotations

import unicodedata

from fairq.backends.sqlite import SQLiteBackend
from fairq.contract import (
    DequeueParams,
    EnqueueParams,
    GetJobsParams,
    StatsParams,
    TenantSettingsParams,
)
from tests.sqlite.helpers import new_job

NASTY = [
    "a",
    "A",
    "a ",
    " a",
    "a:b",
    "a:b:c",
    ":",
    "{a}",
    "a}{b",
    "'",
    '"',
    "'; DROP TABLE jobs; --",
    "%",
    "_",
    "a%",
    "a_",
    "\\",
    "\t\n",
    "\x01control\x1f",  # NUL itself is refused on every store (PostgreSQL cannot keep it)
    unicodedata.normalize("NFC", "café"),
    unicodedata.normalize("NFD", "café"),
    "Ünïcødé ✓ 租户 🎉",
    "x" * 10_000,
    "x" * 9_999,
]


def test_tenant_ids_round_trip_exactly_and_never_collide(backend: SQLiteBackend) -> None:
    assert len(set(NASTY)) == len(NASTY)
    jobs = [new_job(f"job{i}", tenant) for i, tenant in enumerate(NASTY)]
    backend.enqueue(EnqueueParams(jobs=jobs, now=0.0))

    rows = backend.stats(StatsParams())
    assert [r.tenant for r in rows] == sorted(NASTY)
    assert all(r.ready == 1 for r in rows)

    infos = backend.get_jobs(GetJobsParams(ids=[j.id for j in jobs]))
    assert [i.tenant for i in infos] == NASTY

    leases = backend.dequeue(
        DequeueParams(queues=["default"], worker_id="w", now=1.0, limit=len(NASTY) + 1)
    ).leases
    assert sorted(lease.tenant for lease in leases) == sorted(NASTY)
    assert {lease.job_id: lease.tenant for lease in leases} == {j.id: j.tenant for j in jobs}


def test_each_tenant_id_names_only_itself(backend: SQLiteBackend) -> None:
    backend.enqueue(EnqueueParams(jobs=[new_job(f"j{i}", t) for i, t in enumerate(NASTY)], now=0))
    for tenant in NASTY:
        (row,) = backend.stats(StatsParams(queue="default", tenant=tenant))
        assert row.tenant == tenant
    backend.set_tenant(TenantSettingsParams(queue="default", tenant="a:b", now=0.0, weight=5.0))
    weights = {r.tenant: r.weight for r in backend.stats(StatsParams())}
    assert weights.pop("a:b") == 5.0
    assert set(weights.values()) == {1.0}


def test_queue_and_tenant_do_not_run_together(backend: SQLiteBackend) -> None:
    """("a:b", "c") and ("a", "b:c") are different (queue, tenant) pairs."""
    backend.enqueue(
        EnqueueParams(
            jobs=[new_job("j1", "c", queue="a.b"), new_job("j2", "b.c", queue="a")], now=0.0
        )
    )
    assert [(r.queue, r.tenant) for r in backend.stats(StatsParams())] == [
        ("a", "b.c"),
        ("a.b", "c"),
    ]
