"""The App's asyncio methods, mixed into ``fairq.App``.

Each is its blocking twin with the store awaited, sharing everything else: ``aenqueue_many``
drives the very enqueue operation ``enqueue_many`` does (``fairq.app.enqueue.enqueueing``: the
checks, the hooks, the store's requests), and the settings and inspection calls build their
params with ``fairq.app.params``, as the blocking ones do. So a bad argument gets the same error
from both, raised before the store is touched.

The async store (fairq/backends/aio.py) is opened on the first async call, in that call's
event loop, over the App's blocking store (opened in a thread if it is not yet); ``await
app.aclose()`` closes both. A server store's async connections belong to the loop that opened
them: a call from another loop is refused until ``aclose``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from fairq.app import params
from fairq.app.calls import Call, call_by_name
from fairq.app.enqueue import Wanted, enqueueing
from fairq.app.waiting import Pause, check_timeout, result_of
from fairq.backends.aio import AsyncStore, open_async_store
from fairq.backends.steps import adrive
from fairq.cancel import CancelOutcome
from fairq.contract import KEEP, EnqueueParams, GetJobsParams, Keep, TenantFigures, TenantStats
from fairq.errors import ConfigError
from fairq.instrument.timing import TimedAsyncStore
from fairq.job import JobInfo
from fairq.policy.rate import Rate

if TYPE_CHECKING:
    from fairq.app.app import App

log = logging.getLogger("fairq")


class AsyncState:
    """The App's async store, the loop it belongs to, and the lock of its opening."""

    def __init__(self) -> None:
        self.store: AsyncStore | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.opening: asyncio.Lock | None = None


class AsyncMethods:
    """``App``'s async methods (``self`` is always an App: ``_app``)."""

    def _app(self) -> App:
        return cast("App", self)

    async def aenqueue(
        self,
        name: str,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
        **options: Any,
    ) -> str:
        """``enqueue`` awaited: a job by name with JSON arguments; returns its id."""
        return (await self.aenqueue_many([call_by_name(name, args, kwargs, options)]))[0]

    async def aenqueue_many(self, calls: Iterable[Call]) -> list[str]:
        """``enqueue_many`` awaited: several jobs in one store transaction, all or none."""
        app = self._app()
        store = await self.async_store()
        hooks = app.hooks
        timed = TimedAsyncStore(store, hooks) if hooks.times_store_calls else store

        async def perform(wanted: Wanted) -> Any:
            if isinstance(wanted, EnqueueParams):
                return await timed.enqueue(wanted)
            return await timed.job_types()

        return await adrive(enqueueing(app, calls), perform)

    async def aset_tenant(
        self,
        queue: str,
        tenant: str,
        *,
        weight: float | Keep | None = KEEP,
        max_running: int | Keep | None = KEEP,
        rate: Rate | str | Keep | None = KEEP,
    ) -> TenantStats:
        """``set_tenant`` awaited."""
        now = self._app().clock()
        asked = params.tenant_settings(
            now, queue, tenant, weight=weight, max_running=max_running, rate=rate
        )
        return await (await self.async_store()).set_tenant(asked)

    async def aset_queue(
        self,
        queue: str,
        *,
        weight: float | Keep = KEEP,
        max_running: int | Keep | None = KEEP,
        rate: Rate | str | Keep | None = KEEP,
        half_life: float | timedelta | Keep | None = KEEP,
        max_debt: float | timedelta | Keep = KEEP,
        max_in_flight: int | Keep | None = KEEP,
    ) -> None:
        """``set_queue`` awaited: only the settings given change."""
        now = self._app().clock()
        asked = params.queue_settings(now, queue, weight=weight, max_running=max_running,
                                      rate=rate, half_life=half_life, max_debt=max_debt,
                                      max_in_flight=max_in_flight)  # fmt: skip
        await (await self.async_store()).set_queue(asked)

    async def ajob_info(self, job_id: str) -> JobInfo | None:
        """``job_info`` awaited."""
        found = await (await self.async_store()).get_jobs(GetJobsParams(ids=[job_id]))
        return found[0] if found else None

    async def astats(
        self, queue: str | None = None, tenant: str | None = None
    ) -> list[TenantStats]:
        """``stats`` awaited."""
        asked = params.stats(self._app().clock(), queue, tenant)
        return await (await self.async_store()).stats(asked)

    async def afigures(
        self, queue: str | None = None, tenant: str | None = None
    ) -> list[TenantFigures]:
        """``figures`` awaited."""
        asked = params.figures(self._app().clock(), queue, tenant)
        return await (await self.async_store()).figures(asked)

    async def adead(
        self, queue: str | None = None, tenant: str | None = None, limit: int = 100
    ) -> list[JobInfo]:
        """``dead`` awaited."""
        asked = params.dead(queue, tenant, limit)
        return await (await self.async_store()).list_dead(asked)

    async def arequeue(self, ids: Sequence[str]) -> int:
        """``requeue`` awaited."""
        asked = params.requeue(self._app().clock(), ids)
        return await (await self.async_store()).requeue(asked)

    async def aresult(self, job_id: str, *, timeout: float | timedelta | None = None) -> Any:
        """``result`` awaited: the same reads and pauses, the loop free between them."""
        waiting = result_of(params.job_id(job_id), check_timeout(timeout))
        store = await self.async_store()

        async def perform(wanted: Pause | GetJobsParams) -> Any:
            if isinstance(wanted, Pause):
                await asyncio.sleep(wanted.seconds)
                return None
            return await store.get_jobs(wanted)

        return await adrive(waiting, perform)

    async def acancel(self, job_id: str) -> CancelOutcome:
        """``cancel`` awaited."""
        return (await self.acancel_many([job_id]))[0]

    async def acancel_many(self, ids: Sequence[str]) -> list[CancelOutcome]:
        """``cancel_many`` awaited."""
        asked = params.cancel(self._app().clock(), ids)
        store = await self.async_store()
        hooks = self._app().hooks
        timed = TimedAsyncStore(store, hooks) if hooks.times_store_calls else store
        return list((await timed.cancel(asked)).outcomes)

    async def async_store(self) -> AsyncStore:
        """The App's async store, opened on first use in the running event loop."""
        app = self._app()
        state = app._async
        loop = asyncio.get_running_loop()
        store = state.store
        if store is None:
            if state.opening is None or state.loop is not loop:
                state.opening, state.loop = asyncio.Lock(), loop
            async with state.opening:
                if state.store is None:
                    sync = await asyncio.to_thread(lambda: app.backend)  # may connect
                    opened = open_async_store(sync)
                    await opened.open()
                    state.store, state.loop = opened, loop
            store = state.store
            assert store is not None
        if store.native and state.loop is not loop:
            raise ConfigError(
                "this App's async store was opened in another event loop, and its "
                "connections belong to that loop; await app.aclose() in it first (or use one "
                "App per event loop)"
            )
        return store

    async def aclose(self, *, blocking: bool = True) -> None:
        """Close the async store, then the blocking one (in a thread); ``blocking=False``
        leaves the blocking store open (an app that goes on with blocking calls)."""
        app = self._app()
        state = app._async
        store, state.store, state.opening = state.store, None, None
        if store is not None:
            await store.aclose()
        if blocking:
            await asyncio.to_thread(app.close)

    def _forget_async(self) -> None:
        """``App.close``: the async store goes with the blocking one it is built over. Its
        own connections can only be closed by awaiting (``aclose``): say so when open."""
        state = self._app()._async
        store, state.store, state.opening = state.store, None, None
        if store is not None and store.native:
            log.warning(
                "App.close() with the App's async store open: its connections close only "
                "with `await app.aclose()`, in the event loop that opened them"
            )
