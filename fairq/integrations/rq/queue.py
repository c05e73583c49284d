"""``FairQueue``: an ``rq.Queue`` whose enqueue calls store fair tasks in fairq and send
guarded tasks to the queue fairq's throttle rules choose."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

from rq import Queue
from rq.job import Job

from fairq.errors import ConfigError
from fairq.integrations.rq.calls import function_arguments, refuse_rq_options, split_call
from fairq.integrations.rq.router import GuardedTask, guarded_task_of, route
from fairq.integrations.rq.tasks import Held, fair_task_of, task_named


class FairQueue(Queue):
    """An ``rq.Queue`` whose fair tasks go to fairq (the relay releases them into this queue
    when their turn comes); other functions are enqueued into RQ as usual.

    For a fair task the enqueue calls return a ``Held`` (the fairq job id in ``.id``), not an
    ``rq.job.Job``: the RQ job does not exist until the relay releases it. A guarded task with
    throttle rules, enqueued into its home queue, goes to the queue the rules choose (an RQ
    job, returned as usual).
    """

    def _routed(self, task: GuardedTask, args: Any, kwargs: Any) -> Queue:
        """This queue, or the slower one ``task``'s throttle rules send this call to."""
        chosen = route(task, self.name, args or (), kwargs or {})
        if chosen == self.name:
            return self
        return Queue(
            chosen, connection=self.connection, serializer=self.serializer, job_class=self.job_class
        )

    def enqueue_call(  # type: ignore[override]
        self,
        func: Any,
        args: tuple[Any, ...] | list[Any] | None = None,
        kwargs: dict[str, Any] | None = None,
        *rest: Any,
        **options: Any,
    ) -> Job | Held:
        task = fair_task_of(func)
        if task is None:
            guarded = guarded_task_of(func)
            target = self if guarded is None else self._routed(guarded, args, kwargs)
            return Queue.enqueue_call(target, func, args, kwargs, *rest, **options)
        if rest:
            raise ConfigError(
                f"fair task {task.name!r}: pass RQ's options by name, not by position"
            )
        refuse_rq_options(task, options)
        return task.owner.hold(task, self.name, args, kwargs)

    def enqueue_at(self, datetime: datetime, f: Any, *args: Any, **kwargs: Any) -> Job | Held:
        task = fair_task_of(f)
        if task is None:
            guarded = guarded_task_of(f)
            target: Queue = self
            if guarded is not None:
                fn_args, fn_kwargs, _ = function_arguments(args, kwargs)
                target = self._routed(guarded, fn_args, fn_kwargs)
            job: Job = Queue.enqueue_at(target, datetime, f, *args, **kwargs)
            return job
        fn_args, fn_kwargs = split_call(task, args, kwargs)
        return task.owner.hold(task, self.name, fn_args, fn_kwargs, run_at=datetime)

    def enqueue_in(  # type: ignore[override]
        self, time_delta: timedelta, func: Any, *args: Any, **kwargs: Any
    ) -> Job | Held:
        if not isinstance(time_delta, timedelta):
            raise ConfigError(f"enqueue_in needs a timedelta, got {time_delta!r}")
        task = fair_task_of(func)
        if task is None:  # (RQ's enqueue_in calls enqueue_at: route there, once)
            return self.enqueue_at(datetime.now(timezone.utc) + time_delta, func, *args, **kwargs)
        fn_args, fn_kwargs = split_call(task, args, kwargs)
        return task.owner.hold(task, self.name, fn_args, fn_kwargs, delay=time_delta)

    def enqueue_many(  # type: ignore[override]
        self, job_datas: Iterable[Any], pipeline: Any = None, group_id: str | None = None
    ) -> list[Job] | list[Held]:
        """Fair tasks all go to fairq in one transaction; mixing them with other functions in
        one call is refused (they would not be stored atomically together)."""
        datas = list(job_datas)
        tasks = [fair_task_of(data.func) for data in datas]
        if not any(tasks):
            for data in datas:
                guarded = guarded_task_of(data.func)
                home = guarded is not None and guarded.definition.queue == self.name
                if guarded is not None and guarded.definition.throttle and home:
                    raise ConfigError(
                        f"{guarded.name!r} has throttle rules: enqueue it with enqueue(...), "
                        "one call each, so each call is routed"
                    )
            return super().enqueue_many(datas, pipeline=pipeline, group_id=group_id)
        if not all(tasks):
            raise ConfigError(
                "enqueue_many got fair tasks and other functions together; enqueue them in "
                "two calls (fair tasks are stored in fairq, the others in RQ)"
            )
        if pipeline is not None or group_id is not None:
            raise ConfigError("fair tasks take no pipeline or group_id (they are stored in fairq)")
        fair = [t for t in tasks if t is not None]
        owners = {id(t.owner) for t in fair}
        if len(owners) > 1:
            raise ConfigError("enqueue_many got fair tasks of several FairRQ objects")
        for task, data in zip(fair, datas, strict=True):
            refuse_rq_options(task, data._asdict())
        calls = [(data.args, data.kwargs) for data in datas]
        return fair[0].owner.hold_many(fair, self.name, calls)

    def enqueue_job(self, job: Job, *args: Any, **kwargs: Any) -> Job:
        task = task_named(job.func_name)
        if task is not None:
            raise ConfigError(
                f"{task.name!r} is a fair task: enqueue it with queue.enqueue(...) (fairq holds "
                "it until its turn), not as a prepared rq Job"
            )
        enqueued: Job = super().enqueue_job(job, *args, **kwargs)
        return enqueued
