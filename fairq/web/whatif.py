"""The tenant page's "what if": its settings form replayed over the queue's last hour before
they are saved (fairq/sim/whatif.py, docs/what-if.md).

A POST like the change it previews (signed in, the CSRF field, this dashboard's Origin:
``actions.change``), read by the same form code, but it changes nothing: the queue's last
hour is read from the store (``Backend.history``, which locks no live work), replayed as it
ran and with the tenant's new settings, and shown on the tenant's page beside the real waits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from fairq.contract import Keep
from fairq.errors import ConfigError
from fairq.sim import whatif
from fairq.sim.replay import read_history
from fairq.web import data, pages
from fairq.web.actions import change, form_fields
from fairq.web.forms import read_tenant_form

if TYPE_CHECKING:
    from fairq.app import App
    from fairq.web.server import Dashboard

WINDOW = 3600.0  # the last hour
MOST = 100_000  # jobs a page replays; more: the command line (a replay takes ~60 µs a job)


@change
async def what_if(request: Request, board: Dashboard, form: FormData) -> Response:
    name = pages.queue_name(request)
    tenant_id = pages.tenant_param(request)
    fields = form_fields(form)
    current = await board.read(data.tenant_stats, board.app, name, tenant_id)
    asked = read_tenant_form(fields, current)
    errors = dict(asked.errors)
    changed: dict[str, object] = {
        key: value
        for key, value in (
            ("weight", asked.weight),
            ("max_running", asked.max_running),
            ("rate", asked.rate),
        )
        if not isinstance(value, Keep)
    }
    if changed.get("weight") == 0:
        errors["weight"] = "weight 0 pauses the tenant: a replay of it would never end"
    found: dict[str, Any] | None = None
    if not errors:
        changes = whatif.Changes(tenants={tenant_id: changed}, given=_given(changed))
        try:
            found = await board.read(_replay, board.app, name, tenant_id, changes)
        except ConfigError as error:
            errors["what if"] = str(error)
    return await pages.tenant_page(
        request,
        name,
        tenant_id,
        errors=errors or None,
        form=fields,
        whatif=found,
        status_code=400 if errors else 200,
    )


def _given(changed: dict[str, object]) -> tuple[str, ...]:
    return tuple(f"{k}={'default' if v is None else v}" for k, v in changed.items()) or (
        "no change",
    )


def _replay(app: App, queue: str, tenant: str, changes: whatif.Changes) -> dict[str, Any]:
    """The last hour replayed; this tenant's row and the queue's, run by run."""
    now = app.clock()
    recorded = read_history(app.backend, queue, now - WINDOW, now, most=MOST)
    if tenant not in recorded.weights:
        raise ConfigError(f"tenant {tenant!r} has no job in the queue's last hour to replay")
    runs = whatif.replay(recorded, changes, ["fairq"], workers=None)
    if len(runs) == 2:  # nothing changed: the what-if is the as-is replay
        runs.append(runs[1])
    found = whatif.fidelity(runs[0], runs[1])
    return {
        "jobs": recorded.count,
        "workers": runs[1].workers,
        "changes": ", ".join(changes.given),
        "error": None if found is None else found.error,
        "runs": [
            {
                "name": label,
                "tenant": run.tenants.get(tenant),
                "p50": run.figures.waits.p50,
                "p99": run.figures.waits.p99,
                "jain": run.figures.jain_mean,
            }
            for label, run in zip(("actual", "replayed as is", "what if"), runs, strict=True)
        ],
    }
