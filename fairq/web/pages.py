"""The pages (GET): overview, a queue's tenants, one tenant, one job, dead jobs, sign-in."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from fairq.cancel import CancelOutcome
from fairq.errors import ConfigError, InvalidTenant
from fairq.policy.bounds import check_tenant, read_int
from fairq.policy.queues import check_queue_name
from fairq.reports import verdicts
from fairq.web import data
from fairq.web.tables import PAGE_SIZES, SORT_KEYS, TableQuery, table_page

if TYPE_CHECKING:
    from fairq.web.server import Dashboard

STATUSES = (
    verdicts.PAUSED,
    verdicts.CAPPED,
    verdicts.RATE_LIMITED,
    verdicts.THROTTLED,
    verdicts.RUNNING,
    verdicts.WAITING,
    verdicts.IDLE,
)
#: Messages after a change (the redirect names one of these; free text never comes from a URL).
DONE = {
    "saved": "Saved. The next job handed out follows the new settings.",
    "paused": "Paused: its jobs stay queued, nothing is lost; none of them starts until resumed.",
    "resumed": "Resumed: its weight follows the queue's default again.",
    "reset": "Back to the queue's defaults (weight, cap and rate).",
    "unchanged": "Nothing to change: the values are the ones already in force.",
}


#: Messages after a cancel (by the outcome's value).
CANCELLED = {
    CancelOutcome.CANCELLED.value: "Cancelled: the job left its queue and never runs.",
    CancelOutcome.REQUESTED.value: "Asked to stop: its worker learns of it with its next "
    "heartbeat; the job ends cancelled when it stops (or succeeded, if it finishes first).",
    CancelOutcome.FINISHED.value: "Nothing to cancel: the job had already ended.",
}
#: Longest job id the lookup takes (ids are what enqueue returned: far shorter).
MAX_JOB_ID = 1000


def dashboard(request: Request) -> Dashboard:
    found: Dashboard = request.app.state.dashboard
    return found


async def overview(request: Request) -> Response:
    board = dashboard(request)
    found = (await board.reports()).queues
    recent = {report.queue: data.recent(report) for report in found}
    return board.render(request, "overview.html", {"queues": found, "recent": recent})


async def queue(request: Request) -> Response:
    board = dashboard(request)
    name = queue_name(request)
    _, report = await board.report(name)
    if report is None:
        raise HTTPException(404, f"queue {name!r} has no tenants in this store")
    try:
        query = TableQuery.of(request.query_params, SORT_KEYS)
    except ConfigError as exc:
        raise HTTPException(400, str(exc)) from None
    page = table_page(report.tenants, query)
    context = {
        "report": report,
        "table": page,
        "query": query,
        "statuses": STATUSES,
        "sizes": PAGE_SIZES,
    }
    return board.render(request, "queue.html", context)


async def tenant(request: Request) -> Response:
    name = queue_name(request)
    tenant_id = tenant_param(request)
    done = DONE.get(request.query_params.get("done", ""))
    return await tenant_page(request, name, tenant_id, done=done)


async def tenant_page(
    request: Request,
    name: str,
    tenant_id: str,
    *,
    done: str | None = None,
    errors: dict[str, str] | None = None,
    form: dict[str, str] | None = None,
    whatif: dict[str, object] | None = None,
    status_code: int = 200,
) -> Response:
    """One tenant: its row, the change form (signed in), its dead jobs. Also re-shown with
    ``errors`` when a change was refused, or with a replay of its form (fairq/web/whatif.py)."""
    board = dashboard(request)
    _, report = await board.report(name)
    row = None if report is None else data.tenant_row(report, tenant_id)
    if report is None or row is None:
        raise HTTPException(404, f"queue {name!r} has no tenant {tenant_id!r}")
    dead = await board.read(data.dead_jobs, board.app, name, tenant_id)
    shown = form if form is not None else _form_values(row)
    context = {
        "report": report,
        "row": row,
        "dead": dead,
        "done": done,
        "errors": errors or {},
        "form": shown,
        "whatif": whatif,
    }
    return board.render(request, "tenant.html", context, status_code=status_code)


def _form_values(row: dict[str, object]) -> dict[str, str]:
    """The form shows the settings in force (a field left as shown is not changed)."""
    rate = row["rate"]
    rate_text, burst = "", ""
    if isinstance(rate, str):
        rate_text, _, rest = rate.partition(" (burst ")
        burst = rest.rstrip(")")
    cap = row["max_running"]
    return {
        "weight": f"{row['weight']:g}" if isinstance(row["weight"], float) else str(row["weight"]),
        "max_running": "" if cap is None else str(cap),
        "rate": rate_text,
        "burst": burst,
    }


async def job(request: Request) -> Response:
    """One job by id (``?id=``): its state, times, last error, result; a cancel button while
    it is scheduled, ready or running (signed in). Without an id: the lookup form only."""
    board = dashboard(request)
    job_id = job_param(request)
    found = None if job_id is None else await board.read(board.app.job_info, job_id)
    if job_id is not None and found is None:
        message = f"no job with id {job_id!r} in this store (never enqueued here, or deleted "
        message += "after its retention)"
        raise HTTPException(404, message)
    context = {
        "job_id": job_id or "",
        "job": found,
        "done": CANCELLED.get(request.query_params.get("done", "")),
        "can_cancel": found is not None and found.state.value in ("scheduled", "ready", "running"),
    }
    return board.render(request, "job.html", context)


async def dead(request: Request) -> Response:
    board = dashboard(request)
    name = request.query_params.get("queue") or None
    tenant_id = request.query_params.get("tenant") or None
    try:
        if name is not None:
            check_queue_name(name)
        if tenant_id is not None:
            check_tenant(tenant_id)
    except (ConfigError, InvalidTenant) as exc:
        raise HTTPException(400, str(exc)) from None
    jobs = await board.read(data.dead_jobs, board.app, name, tenant_id)
    requeued = request.query_params.get("requeued")
    context = {
        "jobs": jobs,
        "queue": name or "",
        "tenant": tenant_id or "",
        "requeued": None if requeued is None else int_param("requeued", requeued, least=0),
        "limit": data.DEAD_LIMIT,
    }
    return board.render(request, "dead.html", context)


async def login(request: Request) -> Response:
    board = dashboard(request)
    after = safe_next(request.query_params.get("next", "/"))
    return board.render(request, "login.html", {"next": after, "error": None})


async def http_error(request: Request, exc: Exception) -> Response:
    board = dashboard(request)
    code = exc.status_code if isinstance(exc, HTTPException) else 404
    detail = exc.detail if isinstance(exc, HTTPException) else "not found"
    return board.render(request, "error.html", {"message": detail}, status_code=code)


async def store_error(request: Request, exc: Exception) -> Response:
    """The store could not be read or changed (down, unreachable): say so, with its message."""
    message = f"the store cannot be used right now ({type(exc).__name__}: {exc}); retry shortly"
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": message}, status_code=503)
    return dashboard(request).render(request, "error.html", {"message": message}, 503)


#: Seconds between reloads of the page that waits for the store to be made.
WAIT_RELOAD = 3


async def no_store_yet(request: Request, exc: Exception) -> Response:
    """No worker has made the App's SQLite store yet: say so (503), and reload until it is."""
    message = str(exc)
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": message}, status_code=503)
    context = {"message": message, "path": getattr(exc, "path", ""), "reload": WAIT_RELOAD}
    response = dashboard(request).render(request, "waiting.html", context, status_code=503)
    response.headers["Retry-After"] = str(WAIT_RELOAD)
    return response


def queue_name(request: Request) -> str:
    name = str(request.path_params["queue"])
    try:
        return check_queue_name(name)
    except ConfigError as exc:
        raise HTTPException(404, str(exc)) from None


def tenant_param(request: Request) -> str:
    found = request.query_params.get("id")
    if found is None:
        raise HTTPException(400, "name the tenant: ?id=TENANT")
    try:
        return check_tenant(found)
    except (ConfigError, InvalidTenant) as exc:
        raise HTTPException(400, str(exc)) from None


def job_param(request: Request) -> str | None:
    """The job id of ``?id=`` (None when absent or empty); 400 for one no store can hold."""
    found = request.query_params.get("id", "").strip()
    if not found:
        return None
    if len(found) > MAX_JOB_ID:
        raise HTTPException(
            400, f"a job id is at most {MAX_JOB_ID:,} characters; got {len(found):,}"
        )
    return found


def int_param(name: str, text: str, *, least: int = 1) -> int:
    """A whole-number query parameter (``fairq.policy.bounds.read_int``); 400 naming it."""
    try:
        return read_int(text, name, least=least)
    except ConfigError as exc:
        raise HTTPException(400, str(exc)) from None


def safe_next(path: str) -> str:
    """Only a path of this site (``/x``), never ``//other.site`` or ``https://...``."""
    if not path.startswith("/") or path.startswith("//") or "\\" in path:
        return "/"
    return path
