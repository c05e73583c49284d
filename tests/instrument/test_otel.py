"""OpenTelemetry: the enqueue span and the run span are one trace, linked through the trace
context stored with the job; a real worker (in a thread) on a real SQLite store, spans caught
by the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from fairq import App, JobState
from fairq.instrument import JobEnd, Outcome
from fairq.instrument.otel import OpenTelemetryTracing
from fairq.job import Lease
from fairq.worker import Worker
from tests.worker.helpers import wait_for, wait_state


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    made = TracerProvider()
    made.add_span_processor(SimpleSpanProcessor(exporter))
    return made


@pytest.fixture
def app(tmp_path: Path, provider: TracerProvider) -> Iterator[App]:
    made = App(
        f"sqlite:///{tmp_path / 'q.db'}",
        middleware=[OpenTelemetryTracing(tracer_provider=provider)],
    )
    inner = provider.get_tracer("the job's own code")

    @made.job(name="traced", tenant="shop")
    def traced(shop: str) -> None:
        with inner.start_as_current_span("inside the job"):
            pass

    @made.job(name="traced_async", tenant="shop")
    async def traced_async(shop: str) -> None:
        await asyncio.sleep(0)
        with inner.start_as_current_span("inside the async job"):
            await asyncio.sleep(0)

    @made.job(name="fails", tenant="shop", max_attempts=2, retry_base=0.01)
    def fails(shop: str) -> None:
        raise ValueError("no stock")

    yield made
    made.close()


def finished(exporter: InMemorySpanExporter, name: str, count: int = 1) -> list[ReadableSpan]:
    def found() -> list[ReadableSpan] | None:
        spans = [s for s in exporter.get_finished_spans() if s.name == name]
        return spans if len(spans) >= count else None

    spans = wait_for(found, f"{count} span(s) named {name!r}")
    assert spans is not None
    return spans


def test_the_run_span_is_the_child_of_the_enqueue_span(
    app: App, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    with provider.get_tracer("the caller").start_as_current_span("request") as request:
        job_id = app.jobs["traced"].enqueue("acme")
    (enqueue,) = finished(exporter, "enqueue traced")
    assert enqueue.kind is SpanKind.PRODUCER
    assert enqueue.parent is not None
    assert enqueue.parent.span_id == request.get_span_context().span_id
    assert enqueue.attributes is not None
    assert enqueue.attributes["messaging.message.id"] == job_id
    assert enqueue.attributes["messaging.destination.name"] == "default"
    info = app.job_info(job_id)
    assert info is not None
    version, trace_hex, span_hex, _flags = info.headers["traceparent"].split("-")
    assert (version, trace_hex) == ("00", f"{enqueue.context.trace_id:032x}")
    assert span_hex == f"{enqueue.context.span_id:016x}"

    with Worker(app, concurrency=1).in_thread():
        wait_state(app, job_id, JobState.SUCCEEDED)
        (run,) = finished(exporter, "process traced")
    assert run.kind is SpanKind.CONSUMER
    assert run.context.trace_id == enqueue.context.trace_id
    assert run.parent is not None and run.parent.span_id == enqueue.context.span_id
    assert run.attributes is not None
    assert run.attributes["fairq.outcome"] == "succeeded"
    assert run.attributes["fairq.tenant"] == "acme"
    assert run.attributes["fairq.attempt"] == 1
    assert run.attributes["fairq.wait_seconds"] >= 0
    # the job's own spans are children of its run span
    (inside,) = finished(exporter, "inside the job")
    assert inside.parent is not None and inside.parent.span_id == run.context.span_id


def test_an_async_jobs_spans_are_children_of_its_run_span(
    app: App, exporter: InMemorySpanExporter
) -> None:
    job_id = app.jobs["traced_async"].enqueue("acme")
    with Worker(app, concurrency=2).in_thread():
        wait_state(app, job_id, JobState.SUCCEEDED)
        (run,) = finished(exporter, "process traced_async")
    (enqueue,) = finished(exporter, "enqueue traced_async")
    assert run.parent is not None and run.parent.span_id == enqueue.context.span_id
    (inside,) = finished(exporter, "inside the async job")
    assert inside.parent is not None and inside.parent.span_id == run.context.span_id


def test_each_attempt_is_a_run_span_under_the_one_enqueue_span(
    app: App, exporter: InMemorySpanExporter
) -> None:
    job_id = app.jobs["fails"].enqueue("acme")
    with Worker(app, concurrency=1).in_thread():
        wait_state(app, job_id, JobState.DEAD)
        runs = finished(exporter, "process fails", 2)
    (enqueue,) = finished(exporter, "enqueue fails")
    assert [s.attributes["fairq.attempt"] for s in runs if s.attributes] == [1, 2]
    assert [s.attributes["fairq.outcome"] for s in runs if s.attributes] == ["retrying", "dead"]
    for run in runs:
        assert run.parent is not None and run.parent.span_id == enqueue.context.span_id
        assert run.status.status_code is StatusCode.ERROR
        assert run.status.description == "ValueError: no stock"
        assert [event.name for event in run.events] == ["exception"]


def test_a_batch_enqueue_is_one_span_and_every_job_carries_it(
    app: App, exporter: InMemorySpanExporter
) -> None:
    from fairq import Call, Options

    ids = app.enqueue_many(Call("traced", (f"s{i}",), {}, Options()) for i in range(3))
    (enqueue,) = finished(exporter, "enqueue traced")
    assert enqueue.attributes is not None
    assert enqueue.attributes["messaging.batch.message_count"] == 3
    span_hex = f"{enqueue.context.span_id:016x}"
    for job_id in ids:
        info = app.job_info(job_id)
        assert info is not None and info.headers["traceparent"].split("-")[2] == span_hex


def test_a_run_handed_back_while_it_runs_leaves_no_context_behind(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """Shutdown hands a running job back (its end comes first); when its function returns
    at last, the job's thread is left with no span current."""
    plugin = OpenTelemetryTracing(tracer_provider=provider)
    lease = Lease(
        token="tok", job_id="j", name="slow", queue="default", tenant="t", payload="{}",
        attempt=1, max_attempts=3, started_at=10.0, deadline=70.0, lease_timeout=60.0,
        cost=1.0, ready_at=9.0,
    )  # fmt: skip
    plugin.before_run(lease)
    assert trace.get_current_span().get_span_context().is_valid
    plugin.after_job(lease, JobEnd(Outcome.HANDED_BACK, 1.0))  # from the shutdown's thread
    (run,) = finished(exporter, "process slow")
    assert run.attributes is not None and run.attributes["fairq.outcome"] == "handed_back"
    plugin.after_run(lease, None, 2.0)  # the function returned at last
    assert not trace.get_current_span().get_span_context().is_valid
