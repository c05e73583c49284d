"""Small helpers for the Redis Cluster tests."""

from __future__ import annotations

from fairq.backends.redis.keys import key_slot
from fairq.job import NewJob

#: Queues whose slots lie on different masters of a three-master cluster (slots 0-5460,
#: 5461-10922, 10923-16383): q0 and q4 on the first, q1 and q5 on the second, q2 and q3 on the
#: third (tests/redis_cluster/test_cluster_layout.py checks it).
QUEUES = ("q0", "q1", "q2", "q3", "q4", "q5")


def master_index(queue: str) -> int:
    """Which of the three masters ``redis-cli --cluster create`` made serves the queue."""
    slot = key_slot(queue)
    return 0 if slot <= 5460 else 1 if slot <= 10922 else 2


def new_job(n: int, tenant: str = "a", *, queue: str = "q0", job_id: str | None = None) -> NewJob:
    return NewJob(
        id=job_id or f"j{n}",
        name="task",
        queue=queue,
        tenant=tenant,
        payload=f'{{"args":[{n}],"kwargs":{{}}}}',
        run_at=0.0,
        max_attempts=3,
        lease_timeout=30.0,
        cost=1.0,
    )
