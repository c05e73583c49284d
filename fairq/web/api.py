"""Small JSON reads the pages poll: the browser keeps the points and draws the rates."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from fairq.web import data, pages


async def overview(request: Request) -> JSONResponse:
    board = pages.dashboard(request)
    found = await board.reports()
    return JSONResponse(data.overview_sample(found.queues, found.at))


async def throughput(request: Request) -> JSONResponse:
    """``?keep=T`` (repeatable): tenants the chart already draws, so their lines go on."""
    board = pages.dashboard(request)
    name = pages.queue_name(request)
    keep = request.query_params.getlist("keep")[: data.CHART_MOST]
    at, report = await board.report(name)
    return JSONResponse(data.throughput_sample(report, keep, at))
