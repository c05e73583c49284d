"""A replay streams its trace (docs/what-if.md, "Fidelity and scale"): the history is sorted in
runs (spilled to files beyond ``replay.RUN``), every run is fed a page at a time, and each
record is folded into the run's figures as its job finishes. Fed page by page or all at once,
sorted in memory or on disk, the replay must be the same, on the virtual clock."""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path

import pytest

from fairq.job import JobState
from fairq.recorded import RecordedJob
from fairq.sim import replay as replay_module
from fairq.sim import whatif
from fairq.sim.engine import Record, SimJob, Simulation, simulate
from fairq.sim.metrics import figures
from fairq.sim.replay import Trace, read_history
from fairq.sim.strategies import build
from fairq.sim.tally import GROWTH, Histogram, Tally

from .recording import KINDS, QUEUE, jobs_of, opened, record


def busy_day(seed: int = 5, jobs: int = 400) -> list[SimJob]:
    """Jobs of six tenants arriving in bursts (many share an instant), 0.1 to 3 s each."""
    rng = random.Random(seed)
    rows = []
    for n in range(jobs):
        at = round(rng.uniform(0, 60), 0 if n % 3 else 1)  # whole seconds: shared instants
        rows.append((at, f"t{int(rng.paretovariate(1.1)) % 6}", round(rng.uniform(0.1, 3), 2)))
    return jobs_of(rows)


def fed_by_pages(jobs: list[SimJob], spec: str, size: int) -> list[Record]:
    found: list[Record] = []
    run = Simulation(build(spec, {"t1": 3.0}), workers=4, seed=1, sink=found.append)
    for start in range(0, len(jobs), size):
        run.feed(jobs[start : start + size])
    assert run.close() == len(jobs)
    return found


@pytest.mark.parametrize("spec", ["fairq", "fifo", "fairq:slice=0.5"])
@pytest.mark.parametrize("size", [1, 7, 100])
def test_a_run_fed_page_by_page_is_the_run_fed_at_once(spec: str, size: int) -> None:
    """Pages of 1 and 7 split instants that share an arrival time: the instant still reaches
    the strategy as one batch."""
    jobs = busy_day()
    whole = simulate(jobs, build(spec, {"t1": 3.0}), workers=4, seed=1)
    assert fed_by_pages(jobs, spec, size) == whole


def test_a_run_refuses_jobs_out_of_arrival_order() -> None:
    run = Simulation(build("fifo", {}), workers=1, seed=1, sink=lambda r: None)
    run.feed(jobs_of([(5.0, "a", 1.0)]))
    with pytest.raises(ValueError, match="feed jobs in arrival order"):
        run.feed([SimJob(id=9, arrival=4.0, tenant="a", duration=1.0, cost=1.0)])


@pytest.mark.parametrize("spec", ["fairq", "fairq:slice=0.5"])
def test_the_folded_figures_are_the_figures_of_the_records(spec: str) -> None:
    """The same figures as fairq.sim.metrics from every record, but the percentiles, which
    are within half a percent (the histogram's buckets)."""
    jobs = busy_day()
    tally = Tally(window=2.0, weights={"t1": 3.0})
    run = Simulation(
        build(spec, {"t1": 3.0}), workers=4, seed=1, sink=tally.add, waiting=tally.waiting
    )
    run.feed(jobs)
    run.close()
    records = simulate(jobs, build(spec, {"t1": 3.0}), workers=4, seed=1)
    exact = figures(records, workers=4, weights={"t1": 3.0}, window=2.0, whole=False)
    folded = tally.figures(4)
    assert folded.windows == exact.windows > 0
    assert folded.jobs == exact.jobs and folded.tenants == exact.tenants
    for name in ("jain_mean", "jain_min", "gini_mean", "max_lag", "share_error", "makespan",
                 "utilisation"):  # fmt: skip
        assert getattr(folded, name) == pytest.approx(getattr(exact, name), rel=1e-9), name
    assert folded.contended_share == pytest.approx(exact.contended_share, rel=1e-9)
    close = math.sqrt(GROWTH) - 1 + 1e-9
    for tenant, waits in exact.per_tenant.items():
        mine = folded.per_tenant[tenant]
        assert mine.jobs == waits.jobs and mine.max == waits.max
        assert mine.p50 == pytest.approx(waits.p50, rel=close, abs=1e-6)
        assert mine.p99 == pytest.approx(waits.p99, rel=close, abs=1e-6)


def test_a_histogram_percentile_is_within_half_a_percent() -> None:
    rng = random.Random(2)
    values = [0.0] * 30 + [rng.lognormvariate(0, 3) for _ in range(5000)]
    histogram = Histogram()
    for value in values:
        histogram.add(value)
    ordered = sorted(values)
    for q in (1, 10, 50, 90, 99, 99.9, 100):
        exact = ordered[max(1, math.ceil(q / 100 * len(values))) - 1]
        assert histogram.percentile(q) == pytest.approx(exact, rel=math.sqrt(GROWTH) - 1)
    assert histogram.percentile(0.5) == 0.0 and histogram.max == max(values)


@pytest.mark.parametrize("kind", KINDS)
def test_a_trace_sorted_on_disk_replays_as_one_sorted_in_memory(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store's history read with runs of 50 jobs (eight files) against one run in memory:
    the same jobs in the same order, the same pool, window and figures."""
    jobs = busy_day()
    with opened(kind, tmp_path) as (_, backend):
        record(backend, jobs, workers=4, weights={"t1": 3.0})
        in_memory = read_history(backend, QUEUE, 0.0, 1e6)
        monkeypatch.setattr(replay_module, "RUN", 50)
        on_disk = read_history(backend, QUEUE, 0.0, 1e6)

    assert len(on_disk.trace._files) == 8 and not in_memory.trace._files
    assert on_disk.jobs == in_memory.jobs and on_disk.actual == in_memory.actual
    assert (on_disk.count, on_disk.pool, on_disk.window, on_disk.origin) == (
        in_memory.count, in_memory.pool, in_memory.window, in_memory.origin
    )  # fmt: skip
    assert on_disk.pool == 4 and on_disk.count == len(jobs)
    one, other = (
        whatif.replay(r, whatif.Changes(), ["fairq"], workers=2) for r in (in_memory, on_disk)
    )
    assert [run.figures for run in one] == [run.figures for run in other]
    assert one[2].figures.makespan > one[1].figures.makespan  # half the pool: a what-if ran
    on_disk.close()
    assert not on_disk.trace._files


def _copy(n: int, state: JobState, finished: float | None) -> RecordedJob:
    return RecordedJob(
        id=f"j{n}", name="task", tenant="a", state=state, priority=0, attempts=1, cost=1.0,
        enqueued_at=float(n), run_at=float(n), started_at=float(n), finished_at=finished,
    )  # fmt: skip


@pytest.mark.parametrize("run", [2, 100])
def test_a_job_read_twice_keeps_its_later_copy(run: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store may give a job that moved during the read twice (fairq/recorded.py): running,
    then succeeded; in memory or across spilled runs, the later copy is the one kept."""
    monkeypatch.setattr(replay_module, "RUN", run)
    trace = Trace()
    for n in range(3):
        trace.add(_copy(n, JobState.RUNNING, None), 5.0, 5.0, True)
    for n in range(3):
        trace.add(_copy(n, JobState.SUCCEEDED, n + 1.0), 1.0, 5.0, False)
    trace.done()
    rows = list(trace.rows())
    assert [(row[2], row[7], row[10]) for row in rows] == [(f"j{n}", 1.0, 0) for n in range(3)]
    trace.close()


def test_replayed_figures_need_no_records_but_keep_them_when_asked() -> None:
    """Without ``records`` a run keeps none (its figures are folded); with it, the same
    figures and every record."""
    from fairq.model import ReferenceModel

    store = ReferenceModel()
    record(store, busy_day(), workers=4)
    recorded = read_history(store, QUEUE, 0.0, 1e6)
    lean = whatif.replay(recorded, whatif.Changes(), ["fifo"])
    kept = whatif.replay(recorded, whatif.Changes(), ["fifo"], records=True)
    assert [run.records for run in lean] == [[], [], []]
    assert [len(run.records) for run in kept] == [400, 400, 400]
    assert [run.figures for run in lean] == [run.figures for run in kept]
    assert dataclasses.asdict(lean[0].figures) == dataclasses.asdict(kept[0].figures)


def test_the_actual_runs_figures_are_those_of_what_started() -> None:
    """Jobs still waiting when the store is read are not part of the actual run: its folded
    figures are the figures of the recorded runs alone (they would keep a tenant backlogged
    to the end)."""
    from fairq.contract import EnqueueParams
    from fairq.job import NewJob
    from fairq.model import ReferenceModel

    store = ReferenceModel()
    record(store, busy_day(), workers=4)
    waiting = [
        NewJob(id=f"late-{n}", name="task", queue=QUEUE, tenant=f"t{n % 2}", payload="{}",
               run_at=0.0, max_attempts=1, lease_timeout=60.0, cost=1.0)
        for n in range(6)
    ]  # fmt: skip
    store.enqueue(EnqueueParams(jobs=waiting, now=20.0))
    recorded = read_history(store, QUEUE, 0.0, 1e6)
    assert recorded.estimated == 6 and len(recorded.actual) == 400
    actual = whatif.replay(recorded, whatif.Changes(), ["fairq"])[0].figures
    exact = figures(
        recorded.actual,
        workers=recorded.pool,
        weights=recorded.weights,
        window=recorded.window,
        whole=False,
    )
    assert actual.windows == exact.windows > 0
    assert actual.jain_mean == pytest.approx(exact.jain_mean, rel=1e-9)
    assert actual.contended_share == pytest.approx(exact.contended_share, rel=1e-9)
    assert actual.makespan == pytest.approx(exact.makespan, rel=1e-9)
