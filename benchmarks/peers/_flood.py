"""One way to measure fairness under a flood, the same for every system.

One tenant ("big") enqueues ``--big`` jobs of 5 ms; once the workers are busy with them, ten
small tenants enqueue ``--each`` jobs each. Every job pushes
``tenant,enqueued_at,started_at`` to ``STARTS_KEY`` when it starts (one RPUSH: the same cost
for every system). The run ends when every small job has started, or at ``--deadline``
seconds after the small tenants enqueued (then their waits are lower bounds, marked ``>``).

The ``alone`` run is the same small tenants on an idle system: the wait they would see with
no flood. Runs inside each system's own virtual environment, so it needs only redis-py.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from _drive import HERE, counter, mark_done, running

STARTS_KEY = "bench:starts"
JOB_SECONDS = 0.005
SMALL_TENANTS = 10
# Sends one job: (tenant, enqueued_at). Each system passes its own.
Send = Callable[[str, float], None]


def record_start(client: object, tenant: str, enqueued_at: float) -> None:
    """Called first thing in every system's flood job."""
    started = time.time()
    client.rpush(STARTS_KEY, f"{tenant},{enqueued_at!r},{started!r}")  # type: ignore[attr-defined]


def run_job(client: object, tenant: str, enqueued_at: float) -> None:
    """The flood job's body: record the start, then 5 ms of work (a sleep, like I/O)."""
    record_start(client, tenant, enqueued_at)
    time.sleep(JOB_SECONDS)


def drain_job(client: object, seconds: float) -> None:
    """A drain measurement's job: ``seconds`` of work (0: a no-op), then count itself done."""
    if seconds:
        time.sleep(seconds)
    mark_done(client)  # type: ignore[arg-type]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--big", type=int, default=20_000)
    parser.add_argument("--each", type=int, default=20)
    parser.add_argument("--deadline", type=float, default=120.0)
    parser.add_argument("--alone", action="store_true", help="no flood: the small tenants only")
    return parser.parse_args()


def flood(
    send: Send,
    workers: Sequence[Sequence[str]],
    args: argparse.Namespace,
    cwd: Path = HERE,
    send_many: Callable[[list[tuple[str, float]]], None] | None = None,
) -> dict[str, object]:
    """Run one flood (or alone) measurement and return its figures."""
    client = counter()
    client.flushdb()
    big = [] if args.alone else [("big", time.time()) for _ in range(args.big)]
    if big:
        (send_many or (lambda jobs: [send(*job) for job in jobs]))(big)
    with running(workers, cwd):
        if not big:
            send("warm-up", time.time())
        _wait_starts(client, 1, time.monotonic() + args.deadline)
        time.sleep(0.5)  # the workers are in their stride
        small_at = time.time()
        _send_small(send, send_many, args.each)
        all_in = time.time()
        expected = SMALL_TENANTS * args.each
        _wait_small(client, expected, time.monotonic() + args.deadline)
        ended = time.time()
    starts = [_parse(raw) for raw in client.lrange(STARTS_KEY, 0, -1)]
    return _figures(starts, small_at, all_in, ended, expected)


def _send_small(
    send: Send, send_many: Callable[[list[tuple[str, float]]], None] | None, each: int
) -> None:
    """Each small tenant's jobs in one batch where the system has one, else round robin."""
    if send_many is not None:
        for t in range(SMALL_TENANTS):
            send_many([(f"s{t}", time.time())] * each)
        return
    for _ in range(each):
        for t in range(SMALL_TENANTS):
            send(f"s{t}", time.time())


def _parse(raw: bytes) -> tuple[str, float, float]:
    tenant, enqueued, started = raw.decode().split(",")
    return tenant, float(enqueued), float(started)


def _small_started(client: object) -> int:
    rows = client.lrange(STARTS_KEY, 0, -1)  # type: ignore[attr-defined]
    return sum(1 for raw in rows if raw.startswith(b"s"))


def _wait_starts(client: object, target: int, deadline: float) -> None:
    while client.llen(STARTS_KEY) < target:  # type: ignore[attr-defined]
        if time.monotonic() > deadline:
            raise TimeoutError("the workers never started a job")
        time.sleep(0.01)


def _wait_small(client: object, expected: int, deadline: float) -> None:
    while _small_started(client) < expected and time.monotonic() < deadline:
        time.sleep(0.05)


def _figures(
    starts: list[tuple[str, float, float]],
    small_at: float,
    all_in: float,
    ended: float,
    expected: int,
) -> dict[str, object]:
    small = [(t, e, s) for t, e, s in starts if t.startswith("s")]
    waits = sorted(s - e for _, e, s in small)
    censored = expected - len(small)
    waits += [ended - small_at] * censored  # never started: waited at least this long
    waits.sort()
    started = len(waits) - censored
    return {
        "small_p50_ms": _pct(waits, 50) * 1000,
        "small_p99_ms": _pct(waits, 99) * 1000,
        "small_max_ms": waits[-1] * 1000,
        # Which of those are lower bounds: the rank falls among jobs that never started.
        "censored_at": [_rank(len(waits), q) > started for q in (50, 99, 100)],
        "censored": censored,
        "jain": _jain_while_backlogged(starts, all_in, ended),
    }


def _rank(n: int, q: float) -> int:
    return max(math.ceil(q / 100 * n), 1)


def _pct(values: list[float], q: float) -> float:
    return values[_rank(len(values), q) - 1]


def _jain_while_backlogged(
    starts: list[tuple[str, float, float]], opened: float, ended: float
) -> float | None:
    """Jain's index of the starts per tenant while every tenant still had jobs waiting.

    The window opens when the small tenants have enqueued all their jobs and closes when the
    first tenant runs out of waiting jobs (its last job starts). None for an alone run.
    """
    last: dict[str, float] = {}
    for tenant, _, started in starts:
        last[tenant] = max(last.get(tenant, 0.0), started)
    tenants = [t for t in last if t == "big" or t.startswith("s")]
    if "big" not in tenants:
        return None
    smalls = {f"s{t}" for t in range(SMALL_TENANTS)}
    # A tenant with nothing started by the end is still backlogged at the end.
    close = min([last[t] for t in smalls if t in last] + [last["big"], ended])
    counts = dict.fromkeys(["big", *sorted(smalls)], 0)
    for tenant, _, started in starts:
        if tenant in counts and opened <= started <= close:
            counts[tenant] += 1
    values = list(counts.values())
    total = sum(values)
    squares = sum(v * v for v in values)
    return (total * total) / (len(values) * squares) if squares else None


def report(result: dict[str, object]) -> None:
    """The one line a peer script prints: read by benchmarks/redis_fairness.py."""
    json.dump(result, sys.stdout)
    print()
