"""``fairq simulate``: every strategy on the same workload, on a virtual clock; with ``--from``,
a store's own history replayed (fairq/cli/whatif.py)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from fairq.cli import cli
from fairq.cli import whatif as replay
from fairq.cli.admin._common import err_console, out_console, reported_errors
from fairq.cli.numbers import Whole
from fairq.cli.whatif import WHEN_HELP
from fairq.errors import ConfigError
from fairq.policy.bounds import MAX_INT
from fairq.sim import verdict as talk
from fairq.sim.compare import Outcome, compare, table, to_json
from fairq.sim.engine import Outage
from fairq.sim.plots import require_matplotlib, write_plots
from fairq.sim.strategies import STRATEGIES
from fairq.sim.workloads import SCENARIOS, Workload, defaults_of, load_trace, make


def _workloads_help() -> str:
    lines = []
    for name, scenario in SCENARIOS.items():
        params = " ".join(f"{k}={v}" for k, v in defaults_of(scenario).items())
        lines.append(f"  {name:<12} {params}")
    return "\n".join(lines)


def split_specs(text: str) -> list[str]:
    """The strategies of ``--strategies``: a comma starts a new one, except before a further
    ``key=value`` of the one before ('lottery:per_round=500,interval=60,fifo')."""
    specs: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if specs and ":" in specs[-1] and "=" in item and ":" not in item:
            specs[-1] += "," + item
        else:
            specs.append(item)
    return specs


def _strategies_help() -> str:
    return "\n".join(
        f"  {name:<12} {what}" + (f" (settings: {takes})" if takes else "")
        for name, (_, what, takes) in STRATEGIES.items()
    )


@cli.command(
    short_help="Compare fairness strategies on a simulated workload (no store needed).",
    epilog=f"""\b
Workloads and their parameters (defaults shown; change with --param):
{_workloads_help()}

\b
Strategies (give settings as name:key=value,key=value):
{_strategies_help()}

\b
Examples:
  fairq simulate                                  # the flood, every strategy
  fairq simulate -w plans --strategies fairq,lottery,fifo
  fairq simulate -w flood -p jobs=100000 --strategies fairq,fifo,lottery,sharding
  fairq simulate --strategies 'lottery:per_round=500,interval=60' --json
  fairq simulate --trace jobs.csv --plot out/     # your own jobs; out/report.html
  fairq simulate --verdict -w mixed --workers 16  # the talk's table, measured
  fairq simulate --from sqlite:///fairq.db --queue default --since 2h
                                                  # the last 2 hours, replayed as they ran
  fairq simulate --from $FAIRQ_URL --queue default --since 2h \\
      --set acme:weight=3 --set importer:cap=2 --workers 6 --strategy fifo,fairq
                                                  # what if (docs/what-if.md)

\b
The flood's default is 10,000 jobs, not the 100,000 of the issue: the slots model
re-queues every waiting job each retry, so its time grows with the square of the
flood (16 s at 10,000 jobs, about 3 minutes at 30,000). Without slots, a flood of
100,000 runs through the other strategies in seconds.
""",
)
@click.option(
    "-w",
    "--workload",
    type=click.Choice(list(SCENARIOS)),
    default="flood",
    show_default=True,
    help="The scenario to simulate (ignored with --trace).",
)
@click.option(
    "-p",
    "--param",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="A workload parameter, e.g. -p jobs=100000 (repeat for several).",
)
@click.option(
    "--strategies",
    "--strategy",
    default=None,
    help="Comma-separated strategies to compare, in this order. Default: every strategy "
    "(with --verdict: every one, the lottery planner at its defaults and sized to the pool, "
    "fairq plain and with 30-s slices).",
)
@click.option(
    "--verdict",
    is_flag=True,
    help="Print the talk's comparison instead: per strategy fair share (share error), no "
    "starvation (longest starved) and efficiency (of the usable worker time), one number each.",
)
@click.option(
    "--workers",
    type=Whole(1, 10_000),
    default=None,
    help="Workers. Default: 8; replaying a store (--from): the most jobs it had running at once.",
)
@click.option(
    "--seed",
    type=Whole(-MAX_INT - 1, MAX_INT),
    default=1,
    show_default=True,
    help="Same seed, same numbers.",
)
@click.option(
    "--trace",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Simulate your own jobs: a .csv with header arrival,tenant,duration or a .json list "
    "of objects with those keys (seconds).",
)
@click.option(
    "--outage",
    "outages",
    multiple=True,
    metavar="WORKERS@FROM-TO",
    help="Workers that take no job from FROM to TO seconds, e.g. 0,8@60-240 (a hung pool: "
    "with n shards, shard i's pool is workers i, i+n, ...). The JSON's 'held' counts the jobs "
    "it held. Repeat for several.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON, no table.")
@click.option(
    "--plot",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write PNG plots and report.html (all in one file) here. Needs fairq[sim].",
)
@click.option(
    "--from",
    "source",
    metavar="URL",
    default=None,
    help="Replay a queue's own history from this store (read only; docs/what-if.md), "
    "e.g. sqlite:///fairq.db. Needs --queue and --since.",
)
@click.option("--queue", default=None, help="With --from: the queue to replay.")
@click.option(
    "--since", default=None, metavar="WHEN", help=f"With --from: the window's start, {WHEN_HELP}."
)
@click.option(
    "--until", default=None, metavar="WHEN", help="With --from: the window's end. Default: now."
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="TENANT:KEY=VALUE",
    help="With --from: what if a tenant had this setting: weight, cap or rate, e.g. "
    "acme:weight=3, importer:cap=2, acme:rate=100/minute, importer:cap=none. Repeat for several.",
)
@click.option(
    "--set-queue",
    "set_queue",
    multiple=True,
    metavar="KEY=VALUE",
    help="With --from: what if the queue had this setting: weight, cap, rate, max_in_flight, "
    "half_life, max_debt, e.g. max_in_flight=8. Repeat for several.",
)
@click.option(
    "--export",
    "export_to",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="With --from: also write the trace read to this .csv or .json (what --trace reads).",
)
@click.option(
    "--hash-tenants",
    is_flag=True,
    help="With --export: write each tenant id as a salted hash, so the trace can be shared.",
)
def simulate(
    workload: str,
    params: tuple[str, ...],
    strategies: str | None,
    verdict: bool,
    workers: int | None,
    seed: int,
    trace: Path | None,
    outages: tuple[str, ...],
    as_json: bool,
    plot: Path | None,
    source: str | None,
    queue: str | None,
    since: str | None,
    until: str | None,
    sets: tuple[str, ...],
    set_queue: tuple[str, ...],
    export_to: Path | None,
    hash_tenants: bool,
) -> None:
    """Run several fairness strategies on the same simulated jobs and compare them.

    A discrete-event simulation on a virtual clock: WORKERS workers, jobs arriving with a
    tenant and a duration. fairq's order comes from its reference model itself; the other
    strategies (FIFO, interruptible iteration, throttling, lottery planner, slots,
    round-robin, decayed activity, shuffle sharding) are small models documented in
    docs/strategies.md. With --verdict: the talk's table, one number per strategy for fair
    share, no starvation and efficiency. Prints per strategy
    the waits, the newcomer's first start, Jain's index and Gini over backlogged windows, the
    lag behind weighted fair sharing, utilisation and makespan.
    """
    with reported_errors():
        if plot is not None:
            require_matplotlib()  # before the run, not after it
        if source is not None:
            _refuse_with_replay(params, verdict, trace, outages)
            replay.run(
                url=source,
                queue=queue,
                since=since,
                until=until,
                sets=sets,
                set_queue=set_queue,
                specs=split_specs(strategies or "fairq"),
                workers=workers,
                export_to=export_to,
                hash_tenants=hash_tenants,
                as_json=as_json,
                plot=plot,
            )
            return
        _refuse_without_replay(queue, since, until, sets, set_queue, export_to, hash_tenants)
        workers = workers or 8
        chosen = _workload(workload, params, seed, trace)
        if strategies is not None:
            specs = split_specs(strategies)
        else:
            specs = talk.specs(chosen, workers) if verdict else list(STRATEGIES)
        if not specs:
            raise ConfigError("--strategies names none; e.g. --strategies fairq,fifo")
        down = [parse_outage(text, workers) for text in outages]
        outcomes = _run(chosen, specs, workers, seed, down)
        view = talk if verdict else None
        if as_json:
            found = (view.to_json if view else to_json)(
                chosen, outcomes, workers=workers, seed=seed
            )
            click.echo(json.dumps(found, indent=2))
        else:
            out_console().print((view.table if view else table)(chosen, outcomes, workers=workers))
        if plot is not None:
            for path in write_plots(chosen, outcomes, plot):
                err_console().print(f"wrote {path}")


def _refuse_with_replay(
    params: tuple[str, ...], verdict: bool, trace: Path | None, outages: tuple[str, ...]
) -> None:
    """Options of a synthetic workload, which a replay of a store has no use for."""
    given = [name for name, on in (("--param", params), ("--verdict", verdict),
             ("--trace", trace), ("--outage", outages)) if on]  # fmt: skip
    if given:
        raise ConfigError(
            f"{', '.join(given)} cannot go with --from: a replay's jobs are the store's own"
        )


def _refuse_without_replay(queue: str | None, *options: object) -> None:
    """Options of a replay, which need --from."""
    names = ("--since", "--until", "--set", "--set-queue", "--export", "--hash-tenants")
    given = [name for name, value in zip(names, options, strict=True) if value]
    if queue is not None:
        given.insert(0, "--queue")
    if given:
        raise ConfigError(
            f"{', '.join(given)} replay a store's history: give --from URL (the store) too"
        )


def _workload(name: str, params: tuple[str, ...], seed: int, trace: Path | None) -> Workload:
    if trace is not None:
        if params:
            raise ConfigError("--param sets a scenario's parameters; a --trace has none")
        return load_trace(trace)
    parsed: dict[str, str] = {}
    for item in params:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--param {item!r}: write KEY=VALUE, e.g. -p jobs=100000")
        parsed[key.strip()] = value.strip()
    return make(name, seed, parsed)


def parse_outage(text: str, workers: int) -> Outage:
    """``--outage 0,8@60-240``: workers 0 and 8 take no job from 60 s to 240 s."""
    fix = "write WORKERS@FROM-TO, e.g. --outage 0,8@60-240"
    names, at, span = text.partition("@")
    start_text, dash, end_text = span.partition("-")
    try:
        chosen = frozenset(int(w) for w in names.split(","))
        start, end = float(start_text), float(end_text)
    except ValueError:
        raise ConfigError(f"--outage {text!r}: {fix}") from None
    if not (at and dash) or not 0 <= start < end < float("inf"):
        raise ConfigError(f"--outage {text!r}: {fix} (FROM before TO, both seconds >= 0)")
    if not all(0 <= w < workers for w in chosen):
        raise ConfigError(f"--outage {text!r}: workers are numbered 0 to {workers - 1}")
    return Outage(workers=chosen, start=start, end=end)


def _run(
    workload: Workload, specs: list[str], workers: int, seed: int, outages: list[Outage]
) -> list[Outcome]:
    with replay.run_bars(len(workload.jobs)) as progress:
        return compare(
            workload, specs, workers=workers, seed=seed, outages=outages, progress=progress
        )
