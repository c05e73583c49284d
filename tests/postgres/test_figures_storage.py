"""The PostgreSQL store keeps figures only for the window: a tenant's row holds the counts of
its current slot only (tenants.fig_*), which go to the figures table when its slot changes, and
maintain deletes the table's rows of slots that left the window (fairq/backends/postgres/
figures.py, functions/figures.sql)."""

from __future__ import annotations

from typing import Any

from fairq.contract import AckManyParams, DequeueParams, EnqueueParams, MaintainParams
from fairq.policy import histogram

from ._store import DisposableBackend
from .helpers import new_job


def slots(pg: DisposableBackend) -> list[int]:
    rows = pg.db.run(
        lambda cur: cur.execute(
            f'SELECT DISTINCT slot FROM "{pg.schema}".figures ORDER BY slot'
        ).fetchall()
    )
    return [row["slot"] for row in rows]


def in_row(pg: DisposableBackend) -> dict[str, Any]:
    rows = pg.db.run(
        lambda cur: cur.execute(
            f'SELECT fig_slot, fig_keys, fig_counts FROM "{pg.schema}".tenants'
        ).fetchall()
    )
    assert len(rows) == 1
    return dict(rows[0])


def test_a_row_holds_one_slot_and_maintain_deletes_the_slots_out_of_the_window(
    pg: DisposableBackend,
) -> None:
    pg.enqueue(EnqueueParams(jobs=[new_job(n, "t", lease=1e6) for n in range(3)], now=0.0))
    assert pg.dequeue(DequeueParams(queues=["default"], worker_id="w", now=10.0)).leases
    assert slots(pg) == []  # slot 0's wait is in the tenant's row
    for now in (130.0, 250.0):  # slots 2 and 4: the row's slot before goes to the table
        assert pg.dequeue(DequeueParams(queues=["default"], worker_id="w", now=now)).leases
    assert slots(pg) == [0, 2]
    wait = histogram.bucket_of(250.0)  # the third job waited from 0 to 250
    assert in_row(pg) == {"fig_slot": 4, "fig_keys": [wait], "fig_counts": [1]}
    pg.maintain(MaintainParams(now=histogram.WINDOW + 10.0))  # slot 10: slot 0 is out
    assert slots(pg) == [2]
    pg.maintain(MaintainParams(now=2 * histogram.WINDOW))
    assert slots(pg) == []


def test_an_ack_in_a_new_slot_moves_the_rows_counts_before_to_the_table(
    pg: DisposableBackend,
) -> None:
    pg.enqueue(EnqueueParams(jobs=[new_job(0, "t", lease=1e6)], now=0.0))
    (lease,) = pg.dequeue(DequeueParams(queues=["default"], worker_id="w", now=10.0)).leases
    assert pg.ack_many(AckManyParams(tokens=[lease.token], now=130.0)).acked == [lease.token]
    assert slots(pg) == [0]  # the wait, counted in slot 0, moved when the ack (slot 2) counted
    run = 32 + histogram.bucket_of(120.0)  # a run's key: 32 + its bucket
    assert in_row(pg) == {"fig_slot": 2, "fig_keys": [run], "fig_counts": [1]}
