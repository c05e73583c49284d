"""The web dashboard (extra ``fairq[web]``): who waits and why, live, and the knobs to fix it.

Server-rendered pages (starlette + Jinja2) and a little plain JavaScript served from this
package, so it works with no internet access and no build step. ``fairq dashboard`` serves it;
``create_app`` builds the ASGI app for mounting elsewhere. See docs/dashboard.md.
"""

from __future__ import annotations

from fairq.web.security import check_bind
from fairq.web.server import create_app

__all__ = ["check_bind", "create_app"]
