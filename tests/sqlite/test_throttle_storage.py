"""Throttle windows on disk: bounded by the rules' window size, pruned once no rule counts them."""

from __future__ import annotations

from dataclasses import replace

from fairq.backends.sqlite import SQLiteBackend
from fairq.contract import (
    EnqueueParams,
    JobType,
    MaintainParams,
    PublishJobTypesParams,
    ThrottleWindowsParams,
)
from fairq.policy.throttle import Throttle
from tests.sqlite.helpers import new_job

RULES = (Throttle(2, 60.0, "slow"), Throttle(1, 10.0, "slower"))  # window size 3, span 60


def rows(backend: SQLiteBackend) -> list[tuple[str, str, float, float]]:
    found = backend._store.conn.execute(
        "SELECT name, tenant, at, span FROM throttle_times ORDER BY id"
    ).fetchall()
    return [tuple(row) for row in found]


def test_a_window_keeps_at_most_its_size_and_routes_as_the_rules_say(
    backend: SQLiteBackend,
) -> None:
    queues = [
        backend.enqueue(
            EnqueueParams(jobs=[replace(new_job(f"j{i}", "a"), throttle=RULES)], now=20.0 * i)
        ).queues[0]
        for i in range(8)
    ]
    assert queues == ["default", "default", "slow", "slow", "slow", "slow", "slow", "slow"]
    assert rows(backend) == [("task", "a", t, 60.0) for t in (100.0, 120.0, 140.0)]
    windows = backend.throttle_windows(ThrottleWindowsParams(keys=[("task", "a")], now=180.0))
    assert windows == {("task", "a"): [120.0, 140.0]}


def test_maintenance_prunes_windows_whose_every_time_is_out_of_span(
    backend: SQLiteBackend,
) -> None:
    def record(job_id: str, tenant: str, now: float) -> None:
        job = replace(new_job(job_id, tenant), throttle=RULES)
        backend.enqueue(EnqueueParams(jobs=[job], now=now))

    record("a0", "a", 0.0)
    record("b0", "b", 0.0)
    record("b1", "b", 30.0)
    backend.maintain(MaintainParams(now=60.0))  # 0 >= 60 - 60: a's window still counts
    assert len(rows(backend)) == 3
    backend.maintain(MaintainParams(now=61.0))  # a's window expires; b's lives on whole
    assert rows(backend) == [("task", "b", 0.0, 60.0), ("task", "b", 30.0, 60.0)]
    keys = [("task", "a"), ("task", "b"), ("other", "a")]
    windows = backend.throttle_windows(ThrottleWindowsParams(keys=keys, now=61.0))
    assert windows == {("task", "a"): [], ("task", "b"): [30.0], ("other", "a"): []}
    backend.maintain(MaintainParams(now=91.0))
    assert rows(backend) == []


def test_a_wider_rule_set_respans_the_window(backend: SQLiteBackend) -> None:
    backend.enqueue(EnqueueParams(jobs=[replace(new_job("j0"), throttle=RULES)], now=0.0))
    wider = (Throttle(1, 600.0, "slow"),)  # window size 2, span 600
    routed = backend.enqueue(
        EnqueueParams(jobs=[replace(new_job("j1"), throttle=wider)], now=1.0)
    ).queues
    assert routed == ["slow"]
    assert rows(backend) == [("task", "a", 0.0, 600.0), ("task", "a", 1.0, 600.0)]
    backend.maintain(MaintainParams(now=500.0))
    assert len(rows(backend)) == 2


def test_job_types_keep_their_throttle_rules(backend: SQLiteBackend) -> None:
    declared = JobType(
        name="imports.run", queue="default", tenant_arg="account", params=("account",),
        max_attempts=3, lease_timeout=30.0, cost=1.0, throttle=RULES,
    )  # fmt: skip
    backend.publish_job_types(
        PublishJobTypesParams(types=[declared, replace(declared, name="plain", throttle=())])
    )
    assert backend.job_types() == {
        "imports.run": declared,
        "plain": replace(declared, name="plain", throttle=()),
    }
