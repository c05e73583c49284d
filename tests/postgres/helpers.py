"""Small builders shared by the PostgreSQL tests."""

from __future__ import annotations

from fairq.job import NewJob

Q = "default"


def new_job(
    n: int, tenant: str = "a", *, queue: str = Q, run_at: float = 0.0, lease: float = 30.0
) -> NewJob:
    return NewJob(
        id=f"j{n}",
        name="task",
        queue=queue,
        tenant=tenant,
        payload=f'{{"args":[{n}],"kwargs":{{}}}}',
        priority=0,
        run_at=run_at,
        max_attempts=3,
        lease_timeout=lease,
        cost=1.0,
    )
