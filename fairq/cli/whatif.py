"""``fairq simulate --from URL``: replay a queue's own history, as it ran and under changes.

The command's options are in fairq/cli/simulate.py; this is their replay half: reading the
window (``--since``/``--until``), opening the store read-only in intent (a SQLite path that
does not exist is refused, never created), and the progress bars of a long replay.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from datetime import datetime, timezone
from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

from fairq.backends import check_url, open_backend
from fairq.backends.sqlite.url import path_from_url
from fairq.cli.admin._common import err_console, out_console
from fairq.errors import ConfigError
from fairq.sim import whatif
from fairq.sim.replay import Recorded, export, read_history
from fairq.sim.strategies import build
from fairq.urls import redact_url

_LIVE_FROM = 50_000  # jobs per run from which a progress bar is worth showing
_AGO = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)\s*$", re.IGNORECASE)
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
WHEN_HELP = "e.g. 2h (ago), 30m, 1d, 2026-11-28T14:00 (UTC unless it says), or epoch seconds"


def parse_when(option: str, text: str, now: float) -> float:
    """A time for ``--since``/``--until``: a span ago (``2h``), an ISO time, or epoch seconds."""
    ago = _AGO.match(text)
    if ago:
        return now - float(ago.group(1)) * _UNITS[ago.group(2).lower()]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(f"{option} {text!r}: not a time; {WHEN_HELP}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def run(
    *,
    url: str,
    queue: str | None,
    since: str | None,
    until: str | None,
    sets: tuple[str, ...],
    set_queue: tuple[str, ...],
    specs: list[str],
    workers: int | None,
    export_to: Path | None,
    hash_tenants: bool,
    as_json: bool,
    plot: Path | None,
) -> None:
    if queue is None:
        raise ConfigError("--from needs --queue: the queue to replay, e.g. --queue default")
    if since is None:
        raise ConfigError(f"--from needs --since: where the window starts, {WHEN_HELP}")
    now = time.time()
    start = parse_when("--since", since, now)
    end = now if until is None else parse_when("--until", until, now)
    if not start < end:
        raise ConfigError(f"--since ({since}) must be before --until ({until or 'now'})")
    changes = whatif.read_changes(sets, set_queue)
    for spec in specs:  # a bad strategy is refused before the store is read
        build(spec, {})
    with closing(_read(url, queue, start, end)) as recorded:  # closing: its temporary files
        whatif.check_tenants(changes, recorded)
        if export_to is not None:
            count = export(recorded, export_to, hash_tenants=hash_tenants, salt=os.urandom(8).hex())
            err_console().print(f"wrote {count:,} jobs to {export_to}")
        elif hash_tenants:
            raise ConfigError("--hash-tenants hashes the tenants of an --export; give --export too")
        runs = _replay(recorded, changes, specs, workers, keep=plot is not None)
        if as_json:
            click.echo(json.dumps(whatif.to_json(recorded, changes, runs), indent=2))
        else:
            out_console().print(whatif.tables(recorded, changes, runs))
        if plot is not None:
            from fairq.sim.plots import write_replay_plots

            for path in write_replay_plots(recorded, runs, plot):
                err_console().print(f"wrote {path}")


def _read(url: str, queue: str, since: float, until: float) -> Recorded:
    if check_url(url) == "sqlite" and not path_from_url(url).exists():
        raise ConfigError(
            f"no fairq store at {redact_url(url)} (no such file: {path_from_url(url)}); "
            "point --from at your store's URL"
        )
    backend = open_backend(url)
    try:
        console = err_console()
        console.print(f"reading queue {queue} from {redact_url(url)}", style="dim")
        if not console.is_terminal:
            return read_history(backend, queue, since, until)
        bars = Progress(TextColumn("{task.description:<14}"), TextColumn("{task.completed:,} jobs"),
                        console=console, transient=True)  # fmt: skip
        with bars:
            task = bars.add_task("reading", total=None)
            return read_history(
                backend, queue, since, until, lambda n: bars.update(task, completed=n)
            )
    finally:
        backend.close()


def _replay(
    recorded: Recorded,
    changes: whatif.Changes,
    specs: list[str],
    workers: int | None,
    *,
    keep: bool,
) -> list[whatif.Run]:
    """The runs; ``keep``: with their records, which the plots need (memory then grows with
    the window)."""
    with run_bars(recorded.count) as progress:
        return whatif.replay(
            recorded, changes, specs, workers=workers, progress=progress, records=keep
        )


@contextmanager
def run_bars(jobs: int) -> Iterator[Callable[[str, int], None] | None]:
    """A progress bar per run of ``jobs`` jobs, on a terminal and from ``_LIVE_FROM`` jobs
    (None otherwise): the callback takes a run's name and its jobs finished so far."""
    console = err_console()
    if not console.is_terminal or jobs < _LIVE_FROM:
        yield None
        return
    bars = Progress(
        TextColumn("{task.description:<20}"), BarColumn(), MofNCompleteColumn(), console=console
    )
    tasks: dict[str, TaskID] = {}

    def progress(name: str, done: int) -> None:
        if name not in tasks:
            tasks[name] = bars.add_task(name, total=jobs)
        bars.update(tasks[name], completed=done)

    with bars:
        yield progress
