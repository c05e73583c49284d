"""A FastAPI service that enqueues with fairq's async API (docs/async.md).

::

    pip install 'fairq[redis]' fastapi uvicorn
    export FAIRQ_URL=redis://127.0.0.1:6379/0           # or postgresql://…, sqlite:///…
    uvicorn main:api &                                   # the web app: enqueues
    fairq worker main:fq &                               # a worker: runs the jobs

    curl -X POST 127.0.0.1:8000/reports -H 'content-type: application/json' \\
         -d '{"account": "acme", "report": "q3"}'        # {"job": "…"}
    curl 127.0.0.1:8000/jobs/<id>                        # {"state": "succeeded", …}

Every store call is awaited: on Redis and PostgreSQL over their asyncio clients, on SQLite
in a thread; the event loop never waits on the store. Bad input (a tenant id that is not a
string, arguments that are not JSON) is answered 400 with fairq's own message.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

import fairq
from fairq.errors import ConfigError, InvalidTenant, JobArgumentsError, PayloadTooLarge

fq = fairq.App(os.environ.get("FAIRQ_URL"))
#: Where the reports go (the job's visible effect).
REPORTS = Path(os.environ.get("REPORTS_DIR", "reports"))


@fq.job(tenant="account", queue="reports", name="reports.render")
async def render_report(account: str, report: str) -> None:
    """Render one report of one account (here: a small file)."""
    REPORTS.mkdir(parents=True, exist_ok=True)
    (REPORTS / f"{account}-{report}.txt").write_text(f"report {report} of {account}\n")


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    yield
    await fq.aclose()  # the store's connections, in the loop that opened them


api = FastAPI(lifespan=lifespan)


@api.exception_handler(JobArgumentsError)
@api.exception_handler(InvalidTenant)
@api.exception_handler(ConfigError)
@api.exception_handler(PayloadTooLarge)
async def bad_input(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"error": str(exc)}, status_code=400)


class ReportAsked(BaseModel):
    account: object  # checked by fairq, which names the problem
    report: str
    delay: float | None = None


@api.post("/reports")
async def ask_report(asked: ReportAsked) -> dict[str, str]:
    job = render_report.options(delay=asked.delay) if asked.delay else render_report
    return {"job": await job.aenqueue(asked.account, asked.report)}  # type: ignore[arg-type]


@api.get("/jobs/{job_id}")
async def job(job_id: str) -> dict[str, object]:
    info = await fq.ajob_info(job_id)
    if info is None:
        raise HTTPException(404, f"no job {job_id}")
    return {"state": info.state.value, "tenant": info.tenant, "attempts": info.attempts}


@api.get("/tenants/{account}")
async def tenant(account: str) -> list[dict[str, object]]:
    return [
        {"queue": row.queue, "ready": row.ready, "running": row.running, "weight": row.weight}
        for row in await fq.astats(tenant=account)
    ]


@api.put("/tenants/{account}/weight")
async def weigh(account: str, weight: float) -> dict[str, object]:
    row = await fq.aset_tenant("reports", account, weight=weight)
    return {"tenant": row.tenant, "weight": row.weight}
