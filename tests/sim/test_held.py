"""A run on a real store that ends with jobs held says where the store has them: leased to
nobody (a dequeue's reply lost on its way), gone (the store emptied by someone else while the
run went on), or never dequeued. What "held the rest forever" alone never told."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from fairq.contract import Backend, DequeueParams, DequeueResult
from fairq.sim.engine import simulate
from fairq.sim.strategies.fairq import Fairq

from .recording import KINDS, opened
from .test_streaming import busy_day


class LosesOneReply:
    """The real store, but the first dequeue after ``after`` virtual seconds that leases jobs
    loses its reply: the store leased them, the simulator never hears of it."""

    def __init__(self, inner: Backend, after: float) -> None:
        self.inner, self.after, self.lost = inner, after, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def dequeue(self, params: DequeueParams) -> DequeueResult:
        result = self.inner.dequeue(params)
        if result.leases and not self.lost and params.now >= self.after:
            self.lost = len(result.leases)
            return DequeueResult()
        return result


@pytest.mark.parametrize("kind", KINDS)
def test_a_lost_dequeue_reply_is_named_as_jobs_leased_to_nobody(kind: str, tmp_path: Path) -> None:
    with opened(kind, tmp_path) as (_, backend):
        store = LosesOneReply(backend, after=30.0)
        strategy = Fairq(weights={"t1": 3.0}, store=lambda: cast(Backend, store))
        with pytest.raises(RuntimeError, match="held the rest forever") as raised:
            simulate(busy_day(), strategy, workers=4, seed=1)
    assert store.lost and f"(in its store: {store.lost} running)" in str(raised.value)


class EmptiedOnce(LosesOneReply):
    """The real Redis store, whose keys someone else deletes once, ``after`` virtual seconds
    in (another test run's FLUSHDB of a shared database)."""

    def __init__(self, inner: Backend, after: float, prefix: str) -> None:
        super().__init__(inner, after)
        self.prefix = prefix

    def dequeue(self, params: DequeueParams) -> DequeueResult:
        if params.now >= self.after and not self.lost:
            client = self.inner.client  # type: ignore[attr-defined]
            keys = list(client.scan_iter(f"{self.prefix}:*"))
            self.lost = client.delete(*keys)
        return self.inner.dequeue(params)


def test_jobs_gone_from_the_store_are_named_missing(tmp_path: Path) -> None:
    with opened("redis", tmp_path) as (url, backend):
        store = EmptiedOnce(backend, 100.0, url.split("prefix=")[1].split("&")[0])
        strategy = Fairq(weights={"t1": 3.0}, store=lambda: cast(Backend, store))
        with pytest.raises(RuntimeError, match=r"\(in its store: \d+ missing\)"):
            simulate(busy_day(), strategy, workers=4, seed=1)
    assert store.lost
