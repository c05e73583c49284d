"""A Dramatiq project whose import actor is fair between accounts (see README.md).

The one change from a plain Dramatiq project: ``FairDramatiq(broker)`` and ``@fair.actor``
instead of ``@dramatiq.actor``. ``import_rows.send(...)`` now stores the job in fairq, and
``fairq relay tasks:fair`` releases it to the workers in fair order.
"""

from __future__ import annotations

import logging
import os

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from fairq.integrations.dramatiq import FairDramatiq

broker = RedisBroker(
    url=os.environ.get("DRAMATIQ_BROKER_URL", "redis://127.0.0.1:6379/0"),
    namespace=os.environ.get("DRAMATIQ_NAMESPACE", "dramatiq"),
)
dramatiq.set_broker(broker)
fair = FairDramatiq(broker)  # the fairq store: $FAIRQ_URL, else sqlite:///fairq.db here

log = logging.getLogger(__name__)


@fair.actor(tenant="account_id", queue_name="imports", max_retries=3, min_backoff=1000)
def import_rows(account_id: str, batch: int) -> None:
    """Import one batch of rows for one account (here: say so)."""
    log.info("imported batch %d of account %s", batch, account_id)


if __name__ == "__main__":
    # One big account floods the queue; then two small ones arrive and go next, not last.
    for batch in range(200):
        import_rows.send("big-corp", batch)
    for account in ("small-shop", "tiny-startup"):
        import_rows.send(account, 0)
    print("sent 202 jobs; watch them with: fairq stats --queue imports")
