"""The PostgreSQL store keeps figures only for the window: maintain deletes the rows of slots
that left it (fairq/backends/postgres/figures.py)."""

from __future__ import annotations

from fairq.contract import DequeueParams, EnqueueParams, MaintainParams
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


def test_maintain_deletes_the_slots_out_of_the_window(pg: DisposableBackend) -> None:
    pg.enqueue(EnqueueParams(jobs=[new_job(n, f"t{n}", lease=1e6) for n in range(3)], now=0.0))
    for now in (10.0, 130.0):  # slots 0 and 2
        assert pg.dequeue(DequeueParams(queues=["default"], worker_id="w", now=now)).leases
    assert slots(pg) == [0, 2]
    pg.maintain(MaintainParams(now=histogram.WINDOW + 10.0))  # slot 10: slot 0 is out
    assert slots(pg) == [2]
    pg.maintain(MaintainParams(now=2 * histogram.WINDOW))
    assert slots(pg) == []
