"""fairq for asyncio code: ``await job.aenqueue(…)``, ``await app.aenqueue_many(…)``, and the
App's settings and inspection calls awaited (``aset_tenant``, ``ajob_info``, ``astats`` …).

Nothing to import from here to use them: they are methods of ``App`` (app.py in this package)
and of declared jobs. See docs/async.md for how each store performs them.
"""

from __future__ import annotations

from fairq.backends.aio import AsyncStore

__all__ = ["AsyncStore"]
