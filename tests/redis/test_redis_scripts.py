"""The Lua operations: each states its contract, runs by FCALL, and survives a FUNCTION FLUSH."""

from __future__ import annotations

import re
from importlib import resources

import pytest
import redis
from redis_helpers import new_job

from fairq.backends.redis import RedisBackend
from fairq.backends.redis.scripts import NAMES, library
from fairq.contract import AckManyParams, DequeueParams, EnqueueParams, GetJobsParams

CONTRACT = ("KEYS:", "ARGV:", "Touches:", "Returns:")


@pytest.mark.parametrize("name", NAMES)
def test_every_operation_opens_with_its_contract(name: str) -> None:
    source = (resources.files("fairq.backends.redis") / "lua" / f"{name}.lua").read_text()
    header = source.split("\n\n", 1)[0]
    assert header.startswith(f"-- {name}.lua:")
    for word in CONTRACT:
        assert f"-- {word}" in source, f"{name}.lua does not state its {word}"
    assert re.search(rf"^register(_once)?\('{name}', function\(\)$", source, re.M)


def test_the_library_is_reloaded_after_function_flush(
    backend: RedisBackend, raw: redis.Redis
) -> None:
    backend.enqueue(EnqueueParams(jobs=[new_job(0), new_job(1)], now=0.0))
    raw.function_flush()
    assert _loaded(raw) == []
    (lease,) = backend.dequeue(DequeueParams(queues=["default"], worker_id="w", now=1.0)).leases
    assert _loaded(raw) == sorted(library().function(name) for name in NAMES)
    raw.function_flush()
    backend.ack_many(AckManyParams(tokens=[lease.token], now=2.0))
    assert [job.state.value for job in backend.get_jobs(GetJobsParams(ids=["j0", "j1"]))] == [
        "succeeded",
        "ready",
    ]


def test_each_operation_is_one_fcall_once_loaded(backend: RedisBackend, raw: redis.Redis) -> None:
    backend.enqueue(EnqueueParams(jobs=[new_job(0)], now=0.0))
    before = _calls(raw)
    backend.enqueue(EnqueueParams(jobs=[new_job(1)], now=0.0))
    assert _calls(raw) == {"fcall": before["fcall"] + 1, "function": before["function"]}


def test_the_library_name_carries_a_hash_of_its_source() -> None:
    name = library().name
    assert name.startswith("fairq_") and len(name) == len("fairq_") + 16
    assert library().source.startswith(f"#!lua name={name}\n")


def _loaded(raw: redis.Redis) -> list[str]:
    """The functions of the operations library on the server (none when it is not loaded)."""
    found = raw.function_list(library=library().name)
    return sorted(f[b"name"].decode() for lib in found for f in _functions(lib))


def _functions(lib: object) -> list[dict[bytes, bytes]]:
    items = list(lib) if isinstance(lib, list) else []
    fields = dict(zip(items[::2], items[1::2], strict=True))
    return [dict(zip(f[::2], f[1::2], strict=True)) for f in fields.get(b"functions", [])]


def _calls(raw: redis.Redis) -> dict[str, int]:
    stats = raw.info("commandstats")
    fcalls = int(stats.get("cmdstat_fcall", {}).get("calls", 0))
    loads = [int(v.get("calls", 0)) for k, v in stats.items() if k.startswith("cmdstat_function")]
    return {"fcall": fcalls, "function": sum(loads)}
