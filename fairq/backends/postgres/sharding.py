"""Sharded jobs at enqueue: each goes to the least loaded of its tenant's shards.

The loads are read in the enqueue's transaction (``shard_loads``: other eligible tenants per
shard, a range of ``tenants_eligible``, and the tenant's own ready jobs) and weighed by
``fairq.policy.shards.least_loaded``, the rule the reference model follows. Enqueues take the
queue lock shared, so two running at once may both read the same loads and choose the same
shard: a less even spread for that moment, never a job lost or misplaced.
"""

from __future__ import annotations

from dataclasses import replace

from fairq.backends._sql import Queries
from fairq.backends.postgres.records import tenant_key
from fairq.backends.postgres.steps import PgSteps, Sql
from fairq.job import NewJob
from fairq.policy.shards import MAX_OTHERS, least_loaded


def place(q: Queries, job: NewJob) -> PgSteps[NewJob]:
    """The job in the least loaded of its shards (unchanged when it has none)."""
    if not job.shards:
        return job
    args = {"queues": list(job.shards), "tenant": job.tenant, "key": tenant_key(job.tenant),
            "most": MAX_OTHERS}  # fmt: skip
    rows = yield Sql(q["shard_loads"], args)
    loads = [(int(row["others"]), int(row["ready"])) for row in rows]
    return replace(job, queue=job.shards[least_loaded(loads)], shards=())
