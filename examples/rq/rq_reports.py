"""A tiny RQ project with one fair task: each account's reports get their fair share of the
RQ workers, however many reports another account asks for. See README.md to run it."""

from __future__ import annotations

import os

from redis import Redis

from fairq.integrations.rq import FairRQ

#: The Redis your RQ workers use.
redis = Redis.from_url(os.environ.get("RQ_REDIS_URL", "redis://127.0.0.1:6379/0"))
#: fairq's store: $FAIRQ_URL (default sqlite:///fairq.db in the working directory).
fair = FairRQ(redis)


@fair.task(queue="reports", tenant="account_id", lease=30)
def build_report(account_id: str, month: str) -> str:
    """The real work would query and render; the return value is kept by RQ as usual."""
    return f"report of {account_id} for {month}"


#: Enqueue with reports.enqueue(build_report, "acme", "2026-10"), as with any rq.Queue.
reports = fair.queue("reports")
