"""The changes (POST): a tenant's settings, requeueing dead jobs, cancelling a job, signing in
and out.

Each change (``@change``) passes ``Access.refuse_change`` first (token set, signed in, CSRF
field, Origin), and reads its whole form before it touches the store: a refused request has
changed nothing.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from functools import wraps
from typing import TYPE_CHECKING

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from fairq.cancel import CancelOutcome
from fairq.web import data, pages
from fairq.web.format import query
from fairq.web.forms import TenantChange, read_action, read_tenant_form
from fairq.web.security import COOKIE
from fairq.web.sessions import GUESS_INTERVAL, GUESSES

if TYPE_CHECKING:
    from fairq.web.server import Dashboard

MAX_REQUEUE = 1000  # ids in one request

Change = Callable[[Request, "Dashboard", FormData], Awaitable[Response]]


def change(handler: Change) -> Callable[[Request], Awaitable[Response]]:
    """A POST that changes the store: its form read whole, then refused (403, said on the
    page) unless ``Access.refuse_change`` lets it through."""

    @wraps(handler)
    async def endpoint(request: Request) -> Response:
        board = pages.dashboard(request)
        form = await request.form()
        why = board.access.refuse_change(request, _text(form, "csrf"))
        if why is not None:
            return board.render(request, "error.html", {"message": why}, status_code=403)
        return await handler(request, board, form)

    return endpoint


@change
async def change_tenant(request: Request, board: Dashboard, form: FormData) -> Response:
    name = pages.queue_name(request)
    tenant_id = pages.tenant_param(request)
    current = await board.read(data.tenant_stats, board.app, name, tenant_id)
    action = _text(form, "action")
    change = read_action(action) or read_tenant_form(form_fields(form), current)
    if change.errors:
        return await pages.tenant_page(
            request,
            name,
            tenant_id,
            errors=change.errors,
            form=form_fields(form),
            status_code=400,
        )
    done = "unchanged"
    if change.changes_something:
        await board.read(_apply, board, name, tenant_id, change)
        board.forget()
        done = action if action in ("pause", "resume", "reset") else "saved"
        done = {"pause": "paused", "resume": "resumed"}.get(done, done)
    target = f"/queues/{name}/tenant" + query({"id": tenant_id, "done": done})
    return RedirectResponse(target, status_code=303)


def _apply(board: Dashboard, name: str, tenant_id: str, change: TenantChange) -> None:
    board.app.set_tenant(
        name, tenant_id, weight=change.weight, max_running=change.max_running, rate=change.rate
    )


@change
async def requeue(request: Request, board: Dashboard, form: FormData) -> Response:
    ids = [value for value in form.getlist("id") if isinstance(value, str) and value]
    if not ids or len(ids) > MAX_REQUEUE:
        message = (
            "choose at least one dead job to requeue"
            if not ids
            else f"{len(ids):,} jobs in one request is over {MAX_REQUEUE:,}; requeue in parts"
        )
        return board.render(request, "error.html", {"message": message}, status_code=400)
    count = await board.read(board.app.requeue, ids)
    board.forget()
    back = {"requeued": str(count)}
    for key in ("queue", "tenant"):
        value = _text(form, key)
        if value:
            back[key] = value
    return RedirectResponse("/dead" + query(back), status_code=303)


@change
async def cancel(request: Request, board: Dashboard, form: FormData) -> Response:
    """Cancel one job (``App.cancel``): back to its page, which says what the cancel did."""
    job_id = _text(form, "id").strip()
    if not job_id or len(job_id) > pages.MAX_JOB_ID:
        message = "name the job to cancel (its id)" if not job_id else "that is not a job id"
        return board.render(request, "error.html", {"message": message}, status_code=400)
    outcome = await board.read(board.app.cancel, job_id)
    if outcome is CancelOutcome.UNKNOWN:
        message = f"no job with id {job_id!r} in this store: nothing was cancelled"
        return board.render(request, "error.html", {"message": message}, status_code=404)
    board.forget()
    return RedirectResponse("/jobs" + query({"id": job_id, "done": outcome.value}), 303)


async def login(request: Request) -> Response:
    """Sign in with the token: a session cookie (``fairq.web.sessions``). Wrong tokens are
    throttled per client address; while it waits, every attempt is refused unread."""
    board = pages.dashboard(request)
    access = board.access
    form = await request.form()
    after = pages.safe_next(_text(form, "next") or "/")
    error, status = None, 403
    wait = access.sign_in_wait(request)
    if not access.changes_allowed:
        error = (
            "this dashboard has no access token: it is read-only (restart it with --token or "
            "$FAIRQ_DASHBOARD_TOKEN to allow changes)"
        )
    elif (refused := access.refuse_origin(request)) is not None:
        error = refused
    elif wait > 0:
        error, status = _too_many(wait), 429
    elif not access.token_matches(_text(form, "token")):
        access.wrong_token(request)
        error = "wrong token: nothing was changed; check $FAIRQ_DASHBOARD_TOKEN or --token"
    if error is not None:
        context = {"next": after, "error": error}
        response = board.render(request, "login.html", context, status_code=status)
        if status == 429:
            response.headers["Retry-After"] = str(math.ceil(wait))
        return response
    response = RedirectResponse(after, status_code=303)
    assert access.sessions is not None
    response.set_cookie(
        COOKIE,
        access.new_session(),
        max_age=math.ceil(access.sessions.lifetime),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


def _too_many(wait: float) -> str:
    return (
        f"too many wrong tokens from your address: wait {math.ceil(wait)} s, then try again "
        f"(after {GUESSES} wrong tries, one every {GUESS_INTERVAL:g} s)"
    )


async def logout(request: Request) -> Response:
    """Sign out: the session is revoked on the server (a copied cookie stops working too).
    Like a change, it needs the form's CSRF field and this dashboard's Origin, so another site
    cannot sign a person out; without a session there is nothing to end and no cookie is
    touched (a cross-site POST carries no SameSite=Strict cookie)."""
    board = pages.dashboard(request)
    access = board.access
    form = await request.form()
    if not access.signed_in(request):
        return RedirectResponse("/", status_code=303)
    why = access.refuse_change(request, _text(form, "csrf"))
    if why is not None:
        return board.render(request, "error.html", {"message": why}, status_code=403)
    access.end_session(request)
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response


def _text(form: FormData, key: str) -> str:
    value = form.get(key)
    return value if isinstance(value, str) else ""


def form_fields(form: FormData) -> dict[str, str]:
    """The settings form's fields, as typed (a missing one empty)."""
    return {key: _text(form, key) for key in ("weight", "max_running", "rate", "burst")}
