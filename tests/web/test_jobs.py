"""One job's page: find it by id, see its state and last error, cancel it (signed in)."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect

from fairq.app import App
from fairq.job import JobState

from .conftest import TOKEN
from .helpers import WORK, Dashboard, lease, make_dead
from .test_access import post
from .test_pages import sign_in

OpenDashboard = Callable[..., Dashboard]


def state_of(app: App, job_id: str) -> JobState:
    info = app.job_info(job_id)
    assert info is not None
    return info.state


def test_find_a_ready_job_and_cancel_it(
    page: Page, app: App, open_dashboard: OpenDashboard
) -> None:
    job_id = app.jobs[WORK].enqueue("acme", 0.0)
    other = app.jobs[WORK].enqueue("acme", 0.0)
    board = open_dashboard(app.url, "--token", TOKEN)
    sign_in(page, board)
    page.locator("nav a", has_text="Find a job").click()
    page.locator('#lookup input[name="id"]').fill(job_id)
    page.locator("#lookup button").click()
    expect(page.locator("#job-id")).to_have_text(job_id)
    expect(page.locator('#job [data-field="state"]')).to_have_text("ready")
    page.locator("#cancel button").click()
    expect(page.locator("#message")).to_contain_text("Cancelled")
    expect(page.locator('#job [data-field="state"]')).to_have_text("cancelled")
    expect(page.locator("#cancel")).to_have_count(0)  # nothing left to cancel
    assert state_of(app, job_id) is JobState.CANCELLED
    assert state_of(app, other) is JobState.READY  # only the one asked


def test_a_running_job_is_asked_to_stop(
    page: Page, app: App, open_dashboard: OpenDashboard
) -> None:
    job_id = app.jobs[WORK].enqueue("acme", 0.0)
    lease(app, "demo")  # a worker holds it
    board = open_dashboard(app.url, "--token", TOKEN)
    sign_in(page, board)
    page.goto(board.base + f"/jobs?id={job_id}")
    expect(page.locator('#job [data-field="state"]')).to_have_text("running")
    expect(page.locator("#cancel button")).to_have_text("Ask it to stop")
    page.locator("#cancel button").click()
    expect(page.locator("#message")).to_contain_text("Asked to stop")
    expect(page.locator('#job [data-field="state"]')).to_have_text("running (asked to stop)")
    info = app.job_info(job_id)
    assert info is not None and info.cancel_requested and info.state is JobState.RUNNING


def test_a_dead_job_links_to_its_page_with_its_error(
    page: Page, app: App, open_dashboard: OpenDashboard
) -> None:
    dead_id = make_dead(app, "acme", error="ValueError: bad row 7")
    board = open_dashboard(app.url, "--token", TOKEN)
    sign_in(page, board)
    page.goto(board.base + "/dead")
    page.locator(f'#dead-jobs tr[data-job="{dead_id}"] a', has_text=dead_id).click()
    expect(page.locator('#job [data-field="state"]')).to_have_text("dead")
    expect(page.locator('#job [data-field="last_error"]')).to_have_text("ValueError: bad row 7")
    expect(page.locator("#cancel")).to_have_count(0)  # it has ended: nothing to cancel


def test_bad_ids_and_refused_cancels_change_nothing(
    page: Page, app: App, open_dashboard: OpenDashboard
) -> None:
    job_id = app.jobs[WORK].enqueue("acme", 0.0)
    board = open_dashboard(app.url, "--token", TOKEN)
    # not signed in: the page shows the job, no cancel button, and a forged POST is refused
    page.goto(board.base + f"/jobs?id={job_id}")
    expect(page.locator('#job [data-field="state"]')).to_have_text("ready")
    expect(page.locator("#cancel")).to_have_count(0)
    assert post(board.base + "/jobs/cancel", {"id": job_id}) == 403
    response = page.goto(board.base + "/jobs?id=no-such-job")
    assert response is not None and response.status == 404
    expect(page.locator("main")).to_contain_text("no job with id 'no-such-job'")
    response = page.goto(board.base + "/jobs?id=" + "x" * 1001)
    assert response is not None and response.status == 400
    expect(page.locator("main")).to_contain_text("at most 1,000 characters")
    # signed in, a cancel naming an id that is not there: said, and nothing is cancelled
    sign_in(page, board)
    page.goto(board.base + f"/jobs?id={job_id}")
    page.locator('#cancel input[name="id"]').evaluate("field => field.value = 'no-such-job'")
    page.locator("#cancel button").click()
    expect(page.locator("main")).to_contain_text("nothing was cancelled")
    assert state_of(app, job_id) is JobState.READY


def test_read_only_dashboard_shows_the_job_and_the_command(
    page: Page, app: App, open_dashboard: OpenDashboard
) -> None:
    job_id = app.jobs[WORK].enqueue("acme", 0.0)
    board = open_dashboard(app.url)
    page.goto(board.base + f"/jobs?id={job_id}")
    expect(page.locator('#job [data-field="state"]')).to_have_text("ready")
    expect(page.locator("main")).to_contain_text(f"fairq cancel {job_id}")
    assert post(board.base + "/jobs/cancel", {"id": job_id}) == 403
    assert state_of(app, job_id) is JobState.READY
