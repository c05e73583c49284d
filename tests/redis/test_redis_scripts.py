"""The Lua operations: each states its contract, runs by FCALL, and survives a FUNCTION FLUSH."""

from __future__ import annotations

import re
from importlib import resources

import pytest
import redis
from redis_helpers import new_job

from fairq.backends.redis import RedisBackend
from fairq.backends.redis.scripts import NAMES, NEEDS, LibraryError, library, parts
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


@pytest.mark.parametrize("name", [name for name in NEEDS if name not in NAMES])
def test_every_helper_part_opens_with_what_it_holds(name: str) -> None:
    source = (resources.files("fairq.backends.redis") / "lua" / f"{name}.lua").read_text()
    assert source.startswith(f"-- {name}.lua: ")


def test_each_file_of_the_library_comes_after_the_files_it_needs() -> None:
    order = parts(NEEDS, set(NEEDS))
    assert sorted(order) == sorted(NEEDS)
    for name, needed in NEEDS.items():
        assert all(order.index(other) < order.index(name) for other in needed), name
    needs = {"op": ("_lib_b",), "_lib_b": ("_lib_a",), "_lib_a": ()}
    assert parts(needs, set(needs)) == ["_lib_a", "_lib_b", "op"]


def test_a_library_file_missing_unlisted_or_in_a_circle_is_named() -> None:
    needs: dict[str, tuple[str, ...]] = {"op": ("_lib_gone",), "_lib_gone": ()}
    with pytest.raises(LibraryError, match=r"lua/_lib_gone.lua, which lua/op.lua needs, is miss"):
        parts(needs, {"op"})
    with pytest.raises(LibraryError, match=r"lua/stray.lua is not in scripts.NEEDS"):
        parts(needs, {"op", "_lib_gone", "stray"})
    circle = {"op": ("_lib_a",), "_lib_a": ("_lib_b",), "_lib_b": ("_lib_a",)}
    with pytest.raises(LibraryError, match=r"circle: _lib_a -> _lib_b -> _lib_a"):
        parts(circle, set(circle))


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
