"""OpenTelemetry tracing (extra ``fairq[otel]``): a span per enqueue, one per run, one trace.

``App(url, middleware=[OpenTelemetryTracing()])`` on the producers' and the workers' App:

* enqueue: a PRODUCER span ``enqueue <job name>`` (one per ``enqueue``/``enqueue_many`` call,
  a child of whatever span is current), current while the store call runs. Its trace context
  is stored with each job (``NewJob.headers``: ``traceparent``, and ``tracestate``/``baggage``
  when there are some), by the configured propagator (W3C trace context by default);
* run: a CONSUMER span ``process <job name>``, the child of the enqueue span (taken back from
  ``Lease.headers``), current while the job's function runs, so the spans your job makes are
  its children. It ends with the attempt's outcome (``fairq.outcome``: succeeded, retrying,
  dead, …); an exception the job raised is recorded on it. A retried job's runs are siblings
  under the same enqueue span. Relayed jobs (Celery, RQ, Dramatiq) get the same spans in the
  peer's worker process.

Attributes follow OpenTelemetry's messaging conventions (``messaging.system="fairq"``,
``messaging.destination.name``: the queue, ``messaging.message.id``: the job id) plus
``fairq.tenant``, ``fairq.job.name``, ``fairq.attempt`` and ``fairq.wait_seconds``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass, replace
from typing import Any

from fairq import __version__
from fairq.instrument import JobEnd, Middleware, Outcome
from fairq.instrument.extras import needs_extra
from fairq.instrument.logs import describe
from fairq.job import Lease, NewJob

with needs_extra("otel", "OpenTelemetry tracing", "opentelemetry"):
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
    from opentelemetry.context import Context
    from opentelemetry.propagators.textmap import TextMapPropagator
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider

__all__ = ["OpenTelemetryTracing"]

SYSTEM = "fairq"


@dataclass
class _Open:
    """A span this plug-in started, and the token to make its context current no more."""

    span: Span
    token: Token[Context] | None
    mark: Token[_Open | None] | None = None  # an enqueue's: resets ``_enqueue`` at its end


class OpenTelemetryTracing(Middleware):
    """Spans for enqueues and runs, linked through the trace context stored with each job.

    ``tracer_provider``: where spans go (default: the global one, set by your OpenTelemetry
    setup). ``propagator``: how the context is written into and read from job headers
    (default: the global one, W3C ``traceparent`` unless configured otherwise).
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        *,
        propagator: TextMapPropagator | None = None,
    ) -> None:
        self.tracer = trace.get_tracer("fairq", __version__, tracer_provider=tracer_provider)
        self.propagator = propagator
        # The enqueue under way in this thread or task (its before and after hooks run in
        # the same one; after_enqueue gets only the jobs stored, maybe none of those given).
        self._enqueue: ContextVar[_Open | None] = ContextVar(
            f"fairq_otel_enqueue_{id(self)}", default=None
        )
        self._runs: dict[str, _Open] = {}  # by lease token
        # Runs whose end came before their function returned (handed back at shutdown): the
        # context is still attached on the job's thread, for after_run to detach.
        self._attached: dict[str, Token[Context]] = {}
        self._lock = threading.Lock()

    def _propagator(self) -> TextMapPropagator:
        return self.propagator if self.propagator is not None else propagate.get_global_textmap()

    # -- enqueue -----------------------------------------------------------------------

    def before_enqueue(self, jobs: Sequence[NewJob]) -> Sequence[NewJob]:
        first = jobs[0]
        names = {job.name for job in jobs}
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.destination.name": first.queue,
            "fairq.job.name": first.name if len(names) == 1 else sorted(names),
        }
        if len(jobs) == 1:
            attributes["messaging.message.id"] = first.id
            attributes["fairq.tenant"] = first.tenant
        else:
            attributes["messaging.batch.message_count"] = len(jobs)
        span_name = f"enqueue {first.name}" if len(names) == 1 else "enqueue"
        span = self.tracer.start_span(span_name, kind=SpanKind.PRODUCER, attributes=attributes)
        ctx = trace.set_span_in_context(span)
        carrier: dict[str, str] = {}
        self._propagator().inject(carrier, context=ctx)
        opened = _Open(span, otel_context.attach(ctx))
        opened.mark = self._enqueue.set(opened)
        return [replace(job, headers={**job.headers, **carrier}) for job in jobs]

    def after_enqueue(
        self, jobs: Sequence[NewJob], queues: Sequence[str] | None, error: BaseException | None
    ) -> None:
        opened = self._enqueue.get()
        if opened is None:
            return
        if opened.mark is not None:
            self._enqueue.reset(opened.mark)
        if opened.token is not None:
            otel_context.detach(opened.token)
        if error is not None:
            opened.span.record_exception(error)
            opened.span.set_status(Status(StatusCode.ERROR, describe(error)))
        elif queues and len(jobs) == 1 and queues[0] != jobs[0].queue:
            opened.span.set_attribute("fairq.throttled_to", queues[0])
        opened.span.end()

    # -- run ---------------------------------------------------------------------------

    def before_run(self, lease: Lease) -> None:
        parent = self._propagator().extract(dict(lease.headers))
        span = self.tracer.start_span(
            f"process {lease.name}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes={
                "messaging.system": SYSTEM,
                "messaging.operation.type": "process",
                "messaging.destination.name": lease.queue,
                "messaging.message.id": lease.job_id,
                "fairq.job.name": lease.name,
                "fairq.tenant": lease.tenant,
                "fairq.attempt": lease.attempt,
                "fairq.wait_seconds": max(lease.started_at - lease.ready_at, 0.0),
            },
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        with self._lock:
            self._runs[lease.token] = _Open(span, token)

    def after_run(self, lease: Lease, error: BaseException | None, seconds: float) -> None:
        with self._lock:
            opened = self._runs.get(lease.token)
            attached = self._attached.pop(lease.token, None) if opened is None else None
        if opened is None:
            if attached is not None:
                otel_context.detach(attached)
            return
        if opened.token is not None:
            otel_context.detach(opened.token)
            opened.token = None
        if error is not None:
            opened.span.record_exception(error)
            opened.span.set_status(Status(StatusCode.ERROR, describe(error)))

    def after_job(self, lease: Lease, end: JobEnd) -> None:
        with self._lock:
            opened = self._runs.pop(lease.token, None)
            if opened is not None and opened.token is not None:  # still running
                self._attached[lease.token] = opened.token
        if opened is None:  # never ran here (a job this worker does not know, a bad payload)
            return
        opened.span.set_attribute("fairq.outcome", end.outcome.value)
        if end.outcome in (Outcome.LEASE_LOST, Outcome.ERROR) and end.error:
            opened.span.set_status(Status(StatusCode.ERROR, end.error))
        opened.span.end()
