"""The dashboard's ASGI application: routes, templates, access checks, one store at a time.

``create_app(app, token=..., loopback=...)`` builds it; ``fairq dashboard`` serves it with
uvicorn. Store calls are blocking, so they run in worker threads, one at a time (a dashboard
is a light reader; a queue of viewers must not become a load on the store).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import anyio
import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from fairq.app import App
from fairq.backends import check_url
from fairq.backends.sqlite.url import path_from_url
from fairq.errors import ConfigError, FairqError
from fairq.reports.queues import QueueReport
from fairq.urls import redact_url
from fairq.web import actions, api, data, pages, whatif
from fairq.web.format import FILTERS
from fairq.web.security import Access, weak_token
from fairq.web.sessions import DEFAULT_LIFETIME

T = TypeVar("T")
log = logging.getLogger("fairq.web")
REUSE_SECONDS = 1.0
PUBLIC = ("/login", "/favicon.ico")  # served before sign-in
HERE = Path(__file__).parent

#: No inline script or style, nothing from elsewhere, never inside a frame.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


@dataclass(frozen=True)
class Snapshot:
    """Queue reports and the time they were read (the chart's rates divide by it)."""

    at: float
    queues: list[QueueReport]


class Dashboard:
    """What every handler needs: the App, the access rules, the templates, the store lane."""

    def __init__(self, app: App, access: Access) -> None:
        self.app = app
        self.access = access
        #: A SQLite file not made yet (no worker has run): each read looks for it first, so the
        #: dashboard never makes an empty store where the App's will be.
        self.awaited = path_from_url(app.url) if check_url(app.url) == "sqlite" else None
        env = jinja2.Environment(
            loader=jinja2.PackageLoader("fairq.web", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        env.filters.update(FILTERS)
        self.templates = Jinja2Templates(env=env)
        self._lane = anyio.CapacityLimiter(1)
        self._reuse_lock = anyio.Lock()
        self._recent: dict[str | None, tuple[float, Snapshot]] = {}

    async def reports(self, queue: str | None = None) -> Snapshot:
        """Every queue's (or ``queue``'s) report with all tenants. One read less than
        ``REUSE_SECONDS`` old is reused: the chart's poll and the pages of one viewer (or
        several) then cost one store read a second, however many tenants the queue has."""
        async with self._reuse_lock:
            kept = self._recent.get(queue)
            if kept is not None and time.monotonic() - kept[0] < REUSE_SECONDS:
                return kept[1]
            at = self.app.clock()
            found = Snapshot(at, await self.read(data.reports, self.app, queue))
            self._recent[queue] = (time.monotonic(), found)
            return found

    async def report(self, queue: str) -> tuple[float, QueueReport | None]:
        """When it was read, and ``queue``'s report (None: the store has no such queue)."""
        found = await self.reports(queue)
        return found.at, found.queues[0] if found.queues else None

    def forget(self) -> None:
        """After a change: the next page shows the store as it is now."""
        self._recent.clear()

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking store call in a worker thread, one at a time."""
        if self.store_missing():
            raise NoStoreYet(redact_url(self.app.url), self.awaited or Path())
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._lane)

    def store_missing(self) -> bool:
        """Whether the App's SQLite file is still not there (see ``awaited``)."""
        if self.awaited is not None and self.awaited.exists():
            self.awaited = None
        return self.awaited is not None

    def render(
        self, request: Request, name: str, context: dict[str, Any], status_code: int = 200
    ) -> Response:
        access = self.access
        base = {
            "store": redact_url(self.app.url),
            "signed_in": access.signed_in(request),
            "can_change": access.signed_in(request),
            "token_set": access.changes_allowed,
            "csrf": access.csrf_token(request) or "",
        }
        return self.templates.TemplateResponse(
            request, name, {**base, **context}, status_code=status_code
        )


class NoStoreYet(Exception):
    """The App's SQLite file is not there yet: the pages say so, and reload until it is."""

    def __init__(self, url: str, path: Path) -> None:
        super().__init__(f"no fairq store at {url} yet")
        self.url = url
        self.path = path


class Gate(BaseHTTPMiddleware):
    """Host check (loopback binds), sign-in for reads (other binds), security headers."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        board = pages.dashboard(request)
        access = board.access
        if not access.host_ok(request):
            response: Response = PlainTextResponse(
                "This dashboard answers only to a loopback host name (127.0.0.1, localhost, "
                "[::1]); open it by that address.",
                status_code=421,
            )
        elif _needs_sign_in(request, access):
            if request.url.path.startswith("/api/"):
                response = JSONResponse({"error": "sign in first"}, status_code=401)
            else:
                after = quote(request.url.path, safe="/")
                response = RedirectResponse(f"/login?next={after}", status_code=303)
        elif request.url.path == "/metrics" and board.store_missing():
            # /metrics reads the store outside Dashboard.read: it must not make the file either
            message = f"no fairq store at {redact_url(board.app.url)} yet"
            response = PlainTextResponse(message, status_code=503)
        else:
            response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response


def _needs_sign_in(request: Request, access: Access) -> bool:
    public = request.url.path in PUBLIC or request.url.path.startswith("/static/")
    return not public and not access.may_read(request)


def routes() -> list[BaseRoute]:
    return [
        Route("/", pages.overview),
        Route("/queues/{queue}", pages.queue),
        Route("/queues/{queue}/tenant", pages.tenant),
        Route("/queues/{queue}/tenant", actions.change_tenant, methods=["POST"]),
        Route("/queues/{queue}/tenant/whatif", whatif.what_if, methods=["POST"]),
        Route("/jobs", pages.job),
        Route("/jobs/cancel", actions.cancel, methods=["POST"]),
        Route("/dead", pages.dead),
        Route("/dead/requeue", actions.requeue, methods=["POST"]),
        Route("/login", pages.login),
        Route("/login", actions.login, methods=["POST"]),
        Route("/logout", actions.logout, methods=["POST"]),
        Route("/api/overview", api.overview),
        Route("/api/queues/{queue}/throughput", api.throughput),
        Route("/favicon.ico", favicon),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]


async def favicon(request: Request) -> Response:
    """Browsers ask every site for ``/favicon.ico``: answer it (not a 404 on every page)."""
    return FileResponse(HERE / "static" / "favicon.ico", media_type="image/x-icon")


def metrics_routes(app: App) -> list[BaseRoute]:
    """``/metrics``: the same exposition a worker serves (``fairq.instrument.metrics_http``):
    this process's counters and the store's per-queue and top-tenant gauges."""
    try:
        from fairq.instrument.metrics_http import asgi_app, metrics_registry
    except ConfigError as exc:  # the extra fairq[metrics] is not installed
        missing = str(exc)

        async def unavailable(request: Request) -> Response:
            return PlainTextResponse(missing, status_code=501)

        return [Route("/metrics", unavailable)]
    return [Route("/metrics", _Exposition(asgi_app(metrics_registry(app))))]


class _Exposition:
    """prometheus_client's ASGI app at exactly ``/metrics`` (a Mount would redirect to
    ``/metrics/``; a plain function would be taken for a request handler)."""

    def __init__(self, asgi: Callable[..., Any]) -> None:
        self.asgi = asgi

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.asgi(scope, receive, send)


def create_app(
    app: App,
    *,
    token: str | None = None,
    loopback: bool = True,
    session_lifetime: float = DEFAULT_LIFETIME,
    extra_routes: list[BaseRoute] | None = None,
) -> Starlette:
    """The dashboard for ``app``'s store. ``token``: changes allowed to whoever signs in with it
    (None: read-only; one that looks weak is logged as a warning). ``loopback``: bound to a
    loopback address (else reading needs the token). ``session_lifetime``: seconds a sign-in
    lasts (8 hours).
    """
    web = Starlette(
        routes=[*routes(), *metrics_routes(app), *(extra_routes or [])],
        middleware=[Middleware(Gate)],
        exception_handlers={
            HTTPException: pages.http_error,
            FairqError: pages.store_error,
            NoStoreYet: pages.no_store_yet,
        },
    )
    if token is not None and (weakness := weak_token(token)) is not None:
        log.warning("%s", weakness)
    access = Access(token, loopback, session_lifetime=session_lifetime)
    web.state.dashboard = Dashboard(app, access)
    return web
