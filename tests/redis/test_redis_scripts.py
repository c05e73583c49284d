"""The Lua scripts: each states its contract, runs by SHA, and survives a SCRIPT FLUSH."""

from __future__ import annotations

from importlib import resources

import pytest
import redis
from redis_helpers import new_job

from fairq.backends.redis import RedisBackend
from fairq.backends.redis.scripts import NAMES, scripts
from fairq.contract import AckParams, DequeueParams, EnqueueParams

CONTRACT = ("KEYS:", "ARGV:", "Touches:", "Returns:")


@pytest.mark.parametrize("name", NAMES)
def test_every_script_opens_with_its_contract(name: str) -> None:
    source = (resources.files("fairq.backends.redis") / "lua" / f"{name}.lua").read_text()
    header = source.split("\n\n", 1)[0]
    assert header.startswith(f"-- {name}.lua:")
    for word in CONTRACT:
        assert f"-- {word}" in source, f"{name}.lua does not state its {word}"


def test_scripts_are_reloaded_after_script_flush(backend: RedisBackend, raw: redis.Redis) -> None:
    backend.enqueue(EnqueueParams(jobs=[new_job(0), new_job(1)], now=0.0))
    raw.script_flush()
    assert raw.script_exists(scripts()["dequeue"].sha) == [False]
    (lease,) = backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=1.0))
    assert raw.script_exists(scripts()["dequeue"].sha) == [True]
    raw.script_flush()
    backend.ack(AckParams(token=lease.token, now=2.0))
    assert [job.state.value for job in backend.get_jobs(["j0", "j1"])] == ["succeeded", "ready"]


def test_each_operation_runs_by_sha_once_loaded(backend: RedisBackend, raw: redis.Redis) -> None:
    backend.enqueue(EnqueueParams(jobs=[new_job(0)], now=0.0))
    before = _evalsha_calls(raw)
    backend.enqueue(EnqueueParams(jobs=[new_job(1)], now=0.0))
    assert _evalsha_calls(raw) == before + 1
    assert raw.script_exists(*(s.sha for s in scripts().values()))[0]


def _evalsha_calls(raw: redis.Redis) -> int:
    stats = raw.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))
