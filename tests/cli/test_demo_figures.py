"""The demo's figures from hand-made job records: waits, throughput, Jain's index."""

from __future__ import annotations

import click.testing
import pytest

import fairq.cli.demo  # noqa: F401
from fairq.cli import cli
from fairq.demo.figures import JobRecord, fairness_of, mode_figures

TENANTS = ["greedy", "small-1", "small-2"]


def _job(customer: str, enqueued: float, started: float) -> JobRecord:
    return JobRecord(
        customer=customer, enqueued_at=enqueued, started_at=started, finished_at=started + 0.1
    )


def _fifo() -> list[JobRecord]:
    """The greedy tenant's 10 jobs all start before either small tenant's."""
    greedy = [_job("greedy", 0.0, 1.0 + i) for i in range(10)]
    small = [_job(f"small-{n}", 2.5, 11.0 + n) for n in (1, 2)]
    return greedy + small


def _fair() -> list[JobRecord]:
    """After the small tenants arrive at 2.5, the three take turns."""
    starts = [1.0, 2.0, 3.5, 5.5, 7.5, 8.0, 9.0, 10.0, 11.0, 12.0]
    greedy = [_job("greedy", 0.0, s) for s in starts]
    small = [_job("small-1", 2.5, 3.0), _job("small-1", 2.5, 6.0)]
    small += [_job("small-2", 2.5, 4.0), _job("small-2", 2.5, 7.0)]
    return greedy + small


def test_fifo_gives_the_small_tenants_nothing_of_their_share_during_the_flood() -> None:
    fairness = fairness_of(_fifo(), TENANTS, "greedy")
    assert fairness.window == (2.5, 10.0)  # their arrival to the greedy tenant's last start
    assert fairness.got == pytest.approx({"greedy": 0.7, "small-1": 0.0, "small-2": 0.0})
    # each small tenant is owed all it asked for (0.1 s), the greedy one the rest
    assert fairness.owed == pytest.approx({"greedy": 0.5, "small-1": 0.1, "small-2": 0.1})
    assert fairness.index == pytest.approx(1 / 3)


def test_fair_gives_each_tenant_its_share() -> None:
    fairness = fairness_of(_fair(), TENANTS, "greedy")
    assert fairness.window == (2.5, 12.0)
    assert fairness.got == pytest.approx({"greedy": 0.7, "small-1": 0.2, "small-2": 0.2})
    assert fairness.owed == fairness.got
    assert fairness.index == pytest.approx(1.0)


def test_the_greedy_tenant_holding_every_slot_when_the_others_arrive_is_not_unfair() -> None:
    """Two slots, both the greedy tenant's when the small ones arrive: the fair scheduler gives
    each freed slot to a small tenant until they are served (the greedy one already had its
    turn). Counting the starts while every tenant had jobs waiting said 0.67 here (the greedy
    tenant started none in those 0.15 s); over the flood, each got what it was owed."""
    greedy = [_job("greedy", 0.0, s) for s in (1.0, 1.0, 1.3, 1.3, 1.4, 1.4, 1.5, 1.5)]
    small = [_job(f"small-{n}", 1.05, s) for n in (1, 2) for s in (1.1, 1.2)]
    fairness = fairness_of(greedy + small, TENANTS, "greedy")
    assert fairness.window == (1.05, 1.5)
    assert fairness.index == pytest.approx(1.0)


def test_a_small_tenant_served_after_the_flood_lowers_the_index() -> None:
    records = [r for r in _fair() if r.customer != "small-2"]
    records += [_job("small-2", 2.5, 4.0), _job("small-2", 2.5, 20.0)]
    fairness = fairness_of(records, TENANTS, "greedy")
    assert fairness.got["small-2"] == pytest.approx(0.1)
    assert 1 / 3 < fairness.index < 1  # type: ignore[operator]


def test_no_overlap_means_no_index() -> None:
    records = [_job("greedy", 0.0, 1.0), _job("small-1", 5.0, 5.0), _job("small-2", 5.0, 5.0)]
    assert fairness_of(records, TENANTS, "greedy").index is None


def test_waits_and_throughput() -> None:
    figures = mode_figures(_fifo(), TENANTS, ["small-1", "small-2"], "greedy")
    assert figures.small.jobs == 2
    assert figures.small.max == pytest.approx(10.5)
    assert figures.tenants["greedy"].p50 == pytest.approx(5.0)
    assert figures.jobs_per_second == pytest.approx(12 / (13.1 - 1.0))


@pytest.mark.parametrize(
    "args", [["--url", "memory://"], ["--jobs", "0"], ["--job-ms", "-1"], ["--small", "x"]]
)
def test_demo_rejects_bad_options(args: list[str]) -> None:
    result = click.testing.CliRunner().invoke(cli, ["demo", *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
