"""The demo's figures from hand-made job records: waits, throughput, Jain's index window."""

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


def test_fifo_starves_the_small_tenants_in_the_window() -> None:
    fairness = fairness_of(_fifo(), TENANTS)
    assert fairness.starts == {"greedy": 8, "small-1": 0, "small-2": 0}
    assert fairness.index == pytest.approx(1 / 3)


def test_fair_gives_each_tenant_a_turn() -> None:
    fairness = fairness_of(_fair(), TENANTS)
    assert fairness.window == (2.5, 6.0)
    assert fairness.starts == {"greedy": 2, "small-1": 2, "small-2": 1}
    assert fairness.index == pytest.approx(25 / 27)


def test_no_overlap_means_no_index() -> None:
    records = [_job("greedy", 0.0, 1.0), _job("small-1", 5.0, 5.0), _job("small-2", 5.0, 5.0)]
    assert fairness_of(records, TENANTS).index is None


def test_waits_and_throughput() -> None:
    figures = mode_figures(_fifo(), TENANTS, ["small-1", "small-2"])
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
