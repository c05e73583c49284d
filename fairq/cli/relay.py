"""``fairq relay SOURCE``: release fair jobs into a Celery, RQ or Dramatiq broker."""

from __future__ import annotations

import logging

import click

from fairq.cli import cli
from fairq.cli.loader import load_object, rebind
from fairq.cli.numbers import Whole
from fairq.errors import FairqError
from fairq.relay import Relay, RelaySource
from fairq.relay.relay import DEFAULT_HOLD, DEFAULT_IN_FLIGHT, MIN_HOLD
from fairq.startup import StartupSignals, startup_signals

log = logging.getLogger("fairq.relay")

EXAMPLE = "myproject.tasks:fair"


@cli.command("relay")
@click.argument("source_ref", metavar="SOURCE")
@click.option(
    "-q",
    "--queue",
    "queues",
    multiple=True,
    metavar="NAME",
    help="A queue to release (repeat for several). Default: every queue of SOURCE's fair tasks.",
)
@click.option(
    "--in-flight",
    type=Whole(1),
    default=None,
    metavar="N",
    help="At most N jobs of each queue released and not yet finished, across all relays "
    "(stored as the queue's max_in_flight). Match it to the peer workers' slots for that "
    "queue: a newcomer tenant's job then waits behind at most N. Default: as stored, else "
    f"{DEFAULT_IN_FLIGHT}.",
)
@click.option(
    "--max-backlog-age",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Also hold a queue back while its oldest broker message is older than this "
    "(RQ, Dramatiq on Redis; polled).",
)
@click.option(
    "--max-backlog",
    type=Whole(0),
    default=None,
    metavar="N",
    help="Also hold a queue back while more than N of its messages wait in the broker, "
    "whoever sent them (RabbitMQ and Redis brokers; polled).",
)
@click.option(
    "--batch",
    type=Whole(1),
    default=100,
    show_default=True,
    help="Most jobs taken from the store in one call.",
)
@click.option(
    "--hold",
    type=click.FloatRange(min=MIN_HOLD),
    default=DEFAULT_HOLD,
    show_default=True,
    metavar="SECONDS",
    help="How long a released job stays out unclaimed should this relay die: until a worker "
    "claims it, the relay renews its hold every third of this, and a dead relay's jobs are "
    "released again (by another relay) once it lapses. Shorter: a dead relay's jobs, and the "
    "in-flight room they take, come back sooner, for more frequent store writes; longer: a "
    "relay may stall (a long pause, a slow store) for that long without its jobs being sent "
    "twice (a worker would then skip the older copy).",
)
@click.option("--url", metavar="URL", default=None, help="The fairq store, instead of SOURCE's.")
def relay(
    source_ref: str,
    queues: tuple[str, ...],
    in_flight: int | None,
    max_backlog_age: float | None,
    max_backlog: int | None,
    batch: int,
    hold: float,
    url: str | None,
) -> None:
    """Release the fair jobs of SOURCE into its broker, fairly, as room frees up.

    SOURCE is the integration object your tasks module makes, as 'module:attribute', e.g.
    fairq.integrations.celery.FairCelery(app). Run several relays at once if you like: each job
    is released by one of them. A job's run starts when a worker claims it, not when the relay
    releases it. Stops on SIGTERM or Ctrl-C: jobs not yet released stay in fairq, and those
    released that no worker has claimed yet are given back at once.

    \b
    Examples:
      fairq relay myproject.tasks:fair
      fairq relay myproject.tasks:fair --queue imports --in-flight 8
    """
    startup = startup_signals()  # caught since the process started: a SIGTERM stops it cleanly
    try:
        source = load_object(source_ref, EXAMPLE)
    except FairqError as exc:
        raise click.BadParameter(str(exc), param_hint="SOURCE") from None
    if not isinstance(source, RelaySource):
        raise click.BadParameter(
            f"{source_ref} is a {type(source).__name__}, not a fairq integration; point SOURCE "
            "at the object made by FairCelery(...), FairRQ(...) or FairDramatiq(...)",
            param_hint="SOURCE",
        )
    if url is not None:
        rebind(source.app, url)
    chosen = list(queues) or list(source.relay_queues())
    if not chosen:
        raise click.UsageError(f"{source_ref} declares no fair task, and no --queue was given")
    try:
        built = Relay(
            source.app.backend,
            source.publisher(),
            chosen,
            in_flight=in_flight,
            batch=batch,
            max_backlog_age=max_backlog_age,
            max_backlog=max_backlog,
            hold=hold,
            weights=list(source.app.weight_callbacks.values()),
        )
    except FairqError as exc:
        raise click.UsageError(str(exc)) from None
    _stop_on_signals(built, startup)
    built.run()


def _stop_on_signals(built: Relay, startup: StartupSignals) -> None:
    """SIGTERM or Ctrl-C stops the relay: one that came while it started stops it at once."""

    def stop() -> None:
        log.info("relay %s: stopping (%s)", built.name, startup.received[-1])
        built.stop()

    startup.then(stop)
