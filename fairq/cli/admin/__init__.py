"""Admin commands: ``enqueue``, ``stats``, ``tenants``, ``queue``, ``dead``, ``job``,
``cancel``.

One module per command; importing this package registers them all on ``fairq.cli.cli``.
"""

from fairq.cli.admin import cancel, dead, enqueue, job, stats, tenants

__all__ = ["cancel", "dead", "enqueue", "job", "stats", "tenants"]
