"""``fairq worker APP``: run the jobs an App declares, in one process or several."""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING

import click

from fairq.app import App
from fairq.cli import cli
from fairq.cli.loader import load_app, rebind
from fairq.cli.numbers import Whole
from fairq.errors import FairqError
from fairq.startup import StartupSignals, startup_signals
from fairq.worker import Worker
from fairq.worker.supervisor import Supervisor, watch_parent
from fairq.worker.unknown import DEFAULT_TIMEOUT as DEFAULT_UNKNOWN_JOB_TIMEOUT
from fairq.worker.worker import DEFAULT_CONCURRENCY, DEFAULT_RETENTION

if TYPE_CHECKING:
    from fairq.instrument.metrics_http import MetricsServer

DEFAULT_TOP_TENANTS = 20  # fairq.instrument.tenant_gauges.DEFAULT_TOP, without importing it

log = logging.getLogger("fairq.worker")


@cli.command("worker")
@click.argument("app_ref", metavar="APP")
@click.option(
    "-q",
    "--queues",
    metavar="ORDER",
    default=None,
    help="Which queues to serve, in what order. 'a,b': always a first, b only when a is empty. "
    "'reports:3,default:1': draw three to one (and fall through when one is empty). Mixed: "
    "'critical,default:6,slow:1'. Default: the app's declared queues (app.queue(...) and the "
    "jobs' home queues, throttle queues included), strict ones first, the rest by weight.",
)
@click.option(
    "--shards",
    metavar="SHARDS",
    default=None,
    help="Of the app's sharded queues, serve only these shards: '0-3', '1,4,7' or '0-1,6'. "
    "Default: every shard (and the queue itself). Not with --queues, which names shards "
    "directly ('imports@0,imports@1').",
)
@click.option(
    "-c",
    "--concurrency",
    type=Whole(1),
    default=DEFAULT_CONCURRENCY,
    show_default=True,
    help="Jobs each process runs at once (def and async def jobs together).",
)
@click.option(
    "-p",
    "--processes",
    type=Whole(1),
    default=1,
    show_default=True,
    help="Worker processes to run; dead ones are restarted. Use it to spread def jobs over CPUs.",
)
@click.option(
    "--grace-period",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="On SIGTERM/Ctrl-C, how long running jobs may finish before they are handed back "
    "(ready again at once, the attempt not counted). A second Ctrl-C hands them back now.",
)
@click.option(
    "--url",
    metavar="URL",
    default=None,
    help="The store to use instead of the app's own, e.g. sqlite:///jobs.db.",
)
@click.option(
    "--burst",
    is_flag=True,
    help="Exit (code 0) once no job is ready and none is scheduled: for scripts and tests.",
)
@click.option(
    "--retention",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_RETENTION,
    show_default=True,
    metavar="SECONDS",
    help="How long succeeded jobs are kept before they are deleted.",
)
@click.option(
    "--unknown-job-timeout",
    type=click.FloatRange(min=0),
    default=DEFAULT_UNKNOWN_JOB_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="A job this app does not declare is handed back (with a growing back-off) for a worker "
    "that does, e.g. during a rolling deploy; it is dead once this old, counted from its enqueue.",
)
@click.option(
    "--metrics-port",
    type=Whole(0, 65535),
    default=None,
    metavar="PORT",
    help="Serve Prometheus metrics at http://HOST:PORT/metrics (extra fairq[metrics]): this "
    "process's job counts and times, and the store's ready/running jobs per queue and tenant.",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    metavar="HOST",
    help="The address to serve metrics on; 0.0.0.0 for every interface.",
)
@click.option(
    "--metrics-tenants",
    type=Whole(0),
    default=DEFAULT_TOP_TENANTS,
    show_default=True,
    metavar="N",
    help="Tenants per queue with metrics of their own (those with the most ready jobs); the "
    'others are summed as tenant="other", so a million tenants cost Prometheus N+1 series.',
)
@click.option(
    "--periodic/--no-periodic",
    default=True,
    show_default=True,
    help="Enqueue the app's periodic jobs of the queues served (every worker does; the store "
    "keeps one job per tick). --no-periodic leaves it to other workers. Never with --burst.",
)
@click.option("--supervised-by", type=Whole(0), default=None, hidden=True)
@click.pass_context
def worker(
    ctx: click.Context,
    app_ref: str,
    queues: str | None,
    shards: str | None,
    concurrency: int,
    processes: int,
    grace_period: float,
    url: str | None,
    burst: bool,
    retention: float,
    unknown_job_timeout: float,
    metrics_port: int | None,
    metrics_host: str,
    metrics_tenants: int,
    periodic: bool,
    supervised_by: int | None,
) -> None:
    """Run the jobs of APP, a fairq App given as 'module:attribute'.

    The module is imported with the current directory on the path (like uvicorn). The worker
    publishes the app's jobs (so producers can enqueue them by name), takes jobs fairly across
    tenants, enqueues the app's periodic jobs of its queues as their ticks come (one job per
    tick however many workers run), and stops gracefully on SIGTERM or Ctrl-C.

    \b
    Examples:
      fairq worker myproject.jobs:app
      fairq worker myproject.jobs:app --queues critical,default --concurrency 8
      fairq worker myproject.jobs:app --queues reports:3,default:1 --processes 4
      fairq worker myproject.jobs:app --url sqlite:///jobs.db --burst
      fairq worker myproject.jobs:app --metrics-port 9100
    """
    startup = startup_signals()  # caught since the process started: a SIGTERM stops it cleanly
    log.info("loading %s", app_ref, extra={"action": "loading"})
    app = _load(app_ref, url)
    try:
        if shards is not None:
            if queues is not None:
                raise click.UsageError(
                    "--shards chooses among the app's declared queues; with --queues, name the "
                    "shards themselves instead, e.g. --queues imports@0,imports@1"
                )
            queues = str(app.queue_order(shards))
        built = Worker(
            app,
            queues=queues,
            concurrency=concurrency,
            grace_period=grace_period,
            burst=burst,
            retention=retention,
            app_name=app_ref,
            unknown_job_timeout=unknown_job_timeout,
            periodic=periodic,
        )
    except FairqError as exc:
        raise click.UsageError(str(exc)) from None
    if processes > 1:
        if metrics_port is not None:
            raise click.UsageError(
                "--metrics-port serves one process's metrics; with --processes, run one "
                "`fairq worker` per process instead, each with its own --metrics-port"
            )
        _supervise(ctx, app, processes, startup)
    if supervised_by is not None:
        watch_parent(supervised_by, built.stop)
    server = None
    if metrics_port is not None:
        server = _serve_metrics(app, built, metrics_host, metrics_port, metrics_tenants)
    try:
        built.run(startup=startup)
    except FairqError:
        ctx.exit(1)  # the worker has logged why, in one line
    finally:
        if server is not None:
            server.close()


def _serve_metrics(app: App, built: Worker, host: str, port: int, tenants: int) -> MetricsServer:
    """Serve /metrics for the worker's queues (the worker takes the App's plug-ins, with
    the metrics one added here, when it starts)."""
    try:
        from fairq.instrument.metrics_http import metrics_registry, serve
    except FairqError as exc:
        raise click.UsageError(f"--metrics-port: {exc}") from None
    registry = metrics_registry(app, queues=built.order.queues, top=tenants)
    try:
        server = serve(registry, port, host)
    except OSError as exc:
        raise click.UsageError(f"--metrics-port: cannot serve on {host}:{port}: {exc}") from None
    log.info(
        "metrics at http://%s:%d/metrics",
        host,
        server.port,
        extra={"action": "metrics_serving", "port": server.port},
    )
    return server


def _load(app_ref: str, url: str | None) -> App:
    try:
        app = load_app(app_ref)
    except FairqError as exc:
        raise click.BadParameter(str(exc), param_hint="APP") from None
    return rebind(app, url) if url is not None else app


def _supervise(ctx: click.Context, app: App, processes: int, startup: StartupSignals) -> None:
    """Run the same command as ``processes`` child processes; exits with their verdict."""
    if app.url.lower().startswith("memory:"):
        raise click.UsageError(
            "--processes needs a store every process can share; memory:// lives inside one "
            "process. Use e.g. --url sqlite:///fairq.db"
        )
    root = ctx.find_root()
    command = [sys.executable, "-m", "fairq", "--log-level", root.params["log_level"]]
    command += ["--library-log-level", root.params["library_log_level"]]
    command += ["worker", *_child_args(ctx), "--supervised-by", str(os.getpid())]
    ctx.exit(Supervisor(command, processes, burst=ctx.params["burst"]).run(startup))


def _child_args(ctx: click.Context) -> list[str]:
    """This command's arguments as given, without ``--processes``."""
    params = ctx.params
    args = [params["app_ref"], "--concurrency", str(params["concurrency"])]
    args += ["--grace-period", repr(params["grace_period"])]
    args += ["--retention", repr(params["retention"])]
    args += ["--unknown-job-timeout", repr(params["unknown_job_timeout"])]
    if params["queues"] is not None:
        args += ["--queues", params["queues"]]
    if params["shards"] is not None:
        args += ["--shards", params["shards"]]
    if params["url"] is not None:
        args += ["--url", params["url"]]
    if params["burst"]:
        args.append("--burst")
    if not params["periodic"]:
        args.append("--no-periodic")
    return args
