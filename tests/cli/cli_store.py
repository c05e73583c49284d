"""The ``Store`` helper the CLI tests share: a fresh SQLite store and a way to run commands."""

from __future__ import annotations

from dataclasses import dataclass

import click.testing

import fairq.cli.admin
import fairq.cli.demo  # noqa: F401
from fairq.app import App
from fairq.cli import cli
from fairq.contract import DequeueParams, FailParams, StatsParams
from fairq.demo.jobs import WORK


@dataclass
class Store:
    """A fresh store, an App on it with the demo's jobs published, and a way to run commands."""

    url: str
    app: App

    def run(self, *args: str) -> click.testing.Result:
        runner = click.testing.CliRunner()
        return runner.invoke(cli, [*args, "--url", self.url], catch_exceptions=False)

    def snapshot(self) -> list[object]:
        """Everything the admin commands can change, to show a failed command changed nothing.

        Stats as stored (no ``now``): usage read at two moments decays, yet nothing changed.
        """
        stats = self.app.backend.stats(StatsParams())
        return [stats, self.app.dead(limit=1000), self.app.backend.job_types()]

    def enqueue(self, customer: str, queue: str | None = None, n: int = 1) -> list[str]:
        job = self.app.jobs[WORK]
        return [job.options(queue=queue).enqueue(customer, 0.0) for _ in range(n)]

    def make_dead(self, customer: str, error: str = "boom", queue: str = "graveyard") -> str:
        """Enqueue one job, take it, and fail it with no retry: it is dead.

        ``queue`` must hold no other ready job (the dequeue takes the next one).
        """
        job_id = self.enqueue(customer, queue=queue)[0]
        now = self.app.clock()
        leases = self.app.backend.dequeue(
            DequeueParams(queues=[queue], worker_id="test", now=now, limit=1)
        ).leases
        (lease,) = leases
        assert lease.job_id == job_id
        self.app.backend.fail(FailParams(token=lease.token, now=now, error=error, retry_at=None))
        return job_id
