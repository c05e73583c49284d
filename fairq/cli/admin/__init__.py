"""Admin commands: ``enqueue``, ``stats``, ``tenants``, ``queue``, ``dead``, ``job``.

One module per command; importing this package registers them all on ``fairq.cli.cli``.
"""

from fairq.cli.admin import dead, enqueue, job, stats, tenants

__all__ = ["dead", "enqueue", "job", "stats", "tenants"]
