"""Runs jobs from any store: concurrency, leases, heartbeats, graceful shutdown.

``Worker(app).run()`` in code, ``fairq worker module:app`` from a shell (see ``fairq.cli.worker``),
``fairq worker module:app --processes N`` for several processes (see ``supervisor``).
"""

from fairq.worker.worker import Worker, queue_order

__all__ = ["Worker", "queue_order"]
