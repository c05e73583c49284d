"""What if (fairq/sim/whatif.py): the arithmetic of changed settings on the virtual clock, and
``fairq simulate --from`` end to end on a SQLite store, bad input included."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from fairq.cli import cli
from fairq.cli import simulate as _registers  # noqa: F401  (registers the command)
from fairq.contract import AckManyParams, DequeueParams, EnqueueParams, MaintainParams
from fairq.errors import ConfigError
from fairq.job import NewJob
from fairq.model import ReferenceModel
from fairq.sim import whatif
from fairq.sim.replay import Recorded, read_history

from .recording import QUEUE, jobs_of, opened, record


def recorded(rows: Sequence[tuple[float, str, float]], workers: int) -> Recorded:
    store = ReferenceModel()
    record(store, jobs_of(rows), workers=workers)
    return read_history(store, QUEUE, 0.0, 1e6)


def what_if(
    trace: Recorded, *sets: str, queue: Sequence[str] = (), strategies: Sequence[str] = ("fairq",),
    workers: int | None = None,
) -> dict[str, whatif.Run]:  # fmt: skip
    changes = whatif.read_changes(sets, queue)
    whatif.check_tenants(changes, trace)
    runs = whatif.replay(trace, changes, strategies, workers=workers, records=True)
    return {run.name: run for run in runs}


def test_a_cap_of_one_runs_a_tenants_jobs_one_after_another() -> None:
    """Four 1-s jobs of one tenant on two workers end at 2 s; capped at one running, the
    waits are 0, 1, 2, 3 s and the last ends at 4 s."""
    trace = recorded([(0.0, "a", 1.0)] * 4, workers=2)
    runs = what_if(trace, "a:cap=1")
    assert runs["as-is"].figures.makespan == 2.0
    capped = runs["what-if fairq"]
    assert capped.workers == 2
    assert sorted(r.wait for r in capped.records) == [0.0, 1.0, 2.0, 3.0]
    assert capped.figures.makespan == 4.0


def test_the_queue_in_flight_cap_and_the_workers_change_the_pool() -> None:
    trace = recorded([(0.0, "a", 1.0)] * 3 + [(0.0, "b", 1.0)] * 3, workers=3)
    assert what_if(trace, queue=["max_in_flight=1"])["what-if fairq"].figures.makespan == 6.0
    wide = what_if(trace, workers=6)["what-if fairq"]
    assert (wide.workers, wide.figures.makespan, wide.figures.waits.max) == (6, 1.0, 0.0)


def test_a_weight_of_two_gets_two_thirds_while_both_wait() -> None:
    """One worker, 60 one-second jobs each for a and b at once. Equal weights alternate them;
    b at weight 2 is served two jobs of every three while both are backlogged: Jain's index
    over weight-normalised service is near 1 (a 10-s window holds 6 or 7 of b's jobs, not
    exactly 20/3, hence the tolerance)."""
    trace = recorded([(0.0, "a", 1.0)] * 60 + [(0.0, "b", 1.0)] * 60, workers=1)
    runs = what_if(trace, "b:weight=2")
    as_is = runs["as-is"].tenants
    changed = runs["what-if fairq"].tenants
    assert as_is["b"].share == pytest.approx(0.5, abs=0.02)
    assert changed["b"].share == pytest.approx(2 / 3, abs=0.02)
    assert changed["b"].p50 < as_is["b"].p50 and changed["a"].p50 > as_is["a"].p50
    assert runs["what-if fairq"].figures.jain_mean == pytest.approx(1.0, abs=0.02)


def test_each_strategy_asked_is_a_what_if_and_fifo_serves_in_arrival_order() -> None:
    trace = recorded([(0.0, "a", 1.0)] * 5 + [(0.5, "b", 1.0)], workers=1)
    runs = what_if(trace, strategies=["fifo", "fairq"])
    assert list(runs) == ["actual", "as-is", "what-if fifo"]  # fairq unchanged is the as-is
    assert runs["what-if fifo"].tenants["b"].first_start == 4.5
    assert runs["as-is"].tenants["b"].first_start == 0.5


@pytest.mark.parametrize(
    ("sets", "queue", "complaint"),
    [
        (["acme-weight=3"], [], "write TENANT:KEY=VALUE"),
        (["acme:weight"], [], "write TENANT:KEY=VALUE"),
        (["acme:colour=3"], [], "has no setting 'colour'; use weight, cap or rate"),
        (["acme:weight=-1"], [], "weight must be a number from"),
        (["acme:weight=0"], [], "would never run in the replay"),
        (["acme:weight=lots"], [], "'lots' is not a number"),
        (["acme:cap=0"], [], "max_running must be a whole number from 1"),
        (["acme:cap=1.5"], [], "max_running must be a whole number"),
        (["acme:rate=fast"], [], "cannot read rate 'fast'"),
        ([], ["max_in_flight=0"], "max_in_flight must be a whole number from 1"),
        ([], ["speed=2"], "a queue has no setting 'speed'"),
        ([], ["max_in_flight"], "write KEY=VALUE"),
    ],
)
def test_bad_changes_are_refused_naming_the_fix(
    sets: list[str], queue: list[str], complaint: str
) -> None:
    with pytest.raises(ConfigError, match=complaint):
        whatif.read_changes(sets, queue)


def test_a_change_for_a_tenant_the_window_does_not_have_is_refused() -> None:
    trace = recorded([(0.0, "a", 1.0)], workers=1)
    with pytest.raises(ConfigError, match="tenant 'zeta' has no job in this window"):
        what_if(trace, "zeta:weight=3")


# -- the command ------------------------------------------------------------------------------


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """A SQLite store holding a recorded flood with a small tenant, and one job at 5,000 s."""
    rows = [(0.0, "flood", 1.0)] * 40 + [(float(t), "small", 1.0) for t in (2, 5, 9)]
    with opened("sqlite", tmp_path) as (url, backend):
        record(backend, jobs_of([*rows, (5000.0, "late", 1.0)]), workers=2)
    return url


def simulate(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["simulate", *args])
    return result.exit_code, result.output


def test_the_command_replays_a_window_with_changes(store_url: str, tmp_path: Path) -> None:
    code, output = simulate(
        "--from", store_url, "--queue", QUEUE, "--since", "0", "--until", "1000",
        "--set", "small:weight=3", "--workers", "3", "--strategy", "fifo,fairq",
        "--export", str(tmp_path / "t.csv"),
    )  # fmt: skip
    assert code == 0, output
    for run in ("actual", "as-is", "what-if fifo", "what-if fairq"):
        assert f"│ {run}" in output
    assert "fidelity of the as-is replay: error 0%" in output
    assert "wrote 43 jobs to" in output


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--queue", "nope", "--since", "0"], "queue 'nope' has no jobs in this store"),
        (["--queue", QUEUE, "--since", "10000", "--until", "20000"],
         "the store keeps its jobs enqueued from 1970-01-01 00:00:00 UTC"),
        (["--queue", QUEUE, "--since", "0", "--set", "zeta:cap=2"],
         "tenant 'zeta' has no job in this window"),
        (["--queue", QUEUE, "--since", "0", "--set", "small:weight=1e9"], "weight must be"),
        (["--queue", QUEUE, "--since", "0", "--set", "small=3"], "write TENANT:KEY=VALUE"),
        (["--queue", QUEUE, "--since", "yesterday"], "--since 'yesterday': not a time"),
        (["--queue", QUEUE], "--from needs --since"),
        (["--since", "0"], "--from needs --queue"),
        (["--queue", QUEUE, "--since", "0", "--verdict"], "--verdict cannot go with --from"),
        (["--queue", QUEUE, "--since", "0", "--strategy", "magic"], "unknown strategy 'magic'"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_naming_the_fix(
    store_url: str, args: list[str], complaint: str
) -> None:
    code, output = simulate("--from", store_url, *args)
    assert code == 2, output
    errors = [line for line in output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and complaint in errors[0], output


def test_a_replay_needs_a_store_and_a_store_that_exists(tmp_path: Path) -> None:
    code, output = simulate("--set", "a:weight=2")
    assert code == 2 and "--set replay a store's history: give --from URL" in output
    code, output = simulate(
        "--from", f"sqlite:///{tmp_path}/none.db", "--queue", "q", "--since", "0"
    )
    assert code == 2 and "no fairq store at" in output
    assert not (tmp_path / "none.db").exists()


def test_a_window_past_the_retention(tmp_path: Path) -> None:
    """Jobs pruned by the retention are not in the store: a window that held only them is
    refused, saying what is kept."""
    with opened("sqlite", tmp_path) as (url, backend):
        record(backend, jobs_of([(0.0, "a", 1.0), (10.0, "a", 1.0), (5000.0, "b", 1.0)]), workers=1)
        backend.maintain(MaintainParams(now=5001.5, retention=1000.0))
    code, output = simulate("--from", url, "--queue", QUEUE, "--since", "0", "--until", "100")
    assert code == 2
    assert "has no jobs enqueued from 1970-01-01 00:00:00 UTC to 1970-01-01 00:01:40 UTC" in output
    assert "keeps its jobs enqueued from 1970-01-01 01:23:20 UTC" in output


def test_the_replays_workers_come_up_when_the_first_recorded_job_started() -> None:
    """Three 1-s jobs enqueued at 0; the one worker came up at 5 s. Replayed as-is they wait
    as they did, 5, 6 and 7 s, not 0, 1 and 2."""
    store = ReferenceModel()
    store.enqueue(EnqueueParams(jobs=[_new(n) for n in range(3)], now=0.0))
    for at in (5.0, 6.0, 7.0):
        (lease,) = store.dequeue(DequeueParams(queues=[QUEUE], worker_id="w", now=at)).leases
        store.ack_many(AckManyParams(tokens=[lease.token], now=at + 1.0))
    runs = what_if(read_history(store, QUEUE, 0.0, 100.0))
    assert sorted(r.wait for r in runs["actual"].records) == [5.0, 6.0, 7.0]
    assert sorted(r.wait for r in runs["as-is"].records) == [5.0, 6.0, 7.0]


def _new(n: int) -> NewJob:
    return NewJob(
        id=f"j{n}", name="task", queue=QUEUE, tenant="a", payload="{}", run_at=0.0,
        max_attempts=1, lease_timeout=60.0, cost=1.0,
    )  # fmt: skip
