"""``fairq dashboard [APP]``: serve the web dashboard on this machine (extra ``fairq[web]``)."""

from __future__ import annotations

import socket

import click

from fairq.app import App
from fairq.backends import check_url
from fairq.backends.sqlite.url import path_from_url
from fairq.cli import cli
from fairq.cli.admin._common import InputError, StoreError, open_app, reported_errors
from fairq.cli.numbers import Duration, Whole
from fairq.errors import ConfigError
from fairq.startup import startup_signals
from fairq.urls import redact_url

EXTRA_HINT = "the dashboard needs its extra: pip install 'fairq[web]'"


@cli.command(
    short_help="Serve the web dashboard: tenants, why they wait, live throughput.",
    epilog="""\b
Examples:
  fairq dashboard                                  # $FAIRQ_URL or ./fairq.db, read-only
  fairq dashboard myproject.jobs:app --token "$T"  # sign in with $T to change settings
  fairq dashboard --url redis://localhost:6379/0 --port 9000
  FAIRQ_DASHBOARD_TOKEN=... fairq dashboard --host 0.0.0.0   # other machines: token required
""",
)
@click.argument("app_ref", metavar="[APP]", required=False)
@click.option(
    "--url",
    envvar="FAIRQ_URL",
    show_envvar=True,
    default=None,
    metavar="URL",
    help="The store, e.g. sqlite:///fairq.db (default: APP's store, else $FAIRQ_URL, else "
    "./fairq.db).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Any address other than a loopback one needs --token.",
)
@click.option(
    "--port",
    type=Whole(0, 65535),
    default=8000,
    show_default=True,
    help="Port to listen on (0: any free port; the address is printed).",
)
@click.option(
    "--token",
    envvar="FAIRQ_DASHBOARD_TOKEN",
    show_envvar=True,
    default=None,
    metavar="TOKEN",
    help="Access token (16+ characters). Whoever signs in with it may change weights, caps, "
    "rates and requeue dead jobs; without one the dashboard is read-only.",
)
@click.option(
    "--session-lifetime",
    envvar="FAIRQ_DASHBOARD_SESSION_LIFETIME",
    show_envvar=True,
    type=Duration(),
    default="8h",
    show_default=True,
    metavar="DURATION",
    help="How long a sign-in lasts (e.g. 30m, 8h, 2d); then the token is asked again.",
)
def dashboard(
    app_ref: str | None,
    url: str | None,
    host: str,
    port: int,
    token: str | None,
    session_lifetime: float,
) -> None:
    """Serve the dashboard for APP's store (or --url): queues, each tenant's figures and why
    it waits, a live per-tenant throughput chart, dead jobs; with --token, change a tenant's
    weight, cap or rate, pause it, requeue dead jobs.

    Binds 127.0.0.1 unless told otherwise, and refuses any other address without a token. A
    sign-in lasts --session-lifetime; signing out ends it on the server; wrong tokens are
    throttled (5 back to back, then one every 12 s per address). Starts before any worker has
    made a SQLite store: the pages say so until it exists. Stops on Ctrl-C or SIGTERM (exit
    code 0).
    """
    startup = startup_signals()  # caught since the process started: a SIGTERM stops it cleanly
    try:
        import uvicorn

        from fairq.web import check_bind, create_app
        from fairq.web.security import is_loopback
    except ImportError as exc:
        raise click.ClickException(f"{EXTRA_HINT} ({exc})") from None
    try:
        check_bind(host, token or None)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    with reported_errors():
        app = _open(url, app_ref)
    # made before the address is printed: its warnings (a weak token) come first
    web = create_app(
        app, token=token or None, loopback=is_loopback(host), session_lifetime=session_lifetime
    )
    sock = _listen(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    mode = "changes need the token" if token else "read-only (no --token)"
    click.echo(
        f"fairq dashboard on http://{shown}:{bound_port}/ (store {redact_url(app.url)}; {mode})",
        err=True,
    )
    config = uvicorn.Config(web, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    # uvicorn handles the stop signals while it serves, then puts this handler back and raises
    # the signal again (for Python's default, an exit by the signal): here it ends in a return
    startup.then(lambda: setattr(server, "should_exit", True))
    try:
        server.run(sockets=[sock])
    finally:
        app.close()


def _open(url: str | None, app_ref: str | None) -> App:
    """The App whose store to show. A SQLite file not made yet is no error: the pages say so
    and show the store once a worker (or the first enqueue) has made it."""
    app = open_app(url, app_ref)
    kind = check_url(app.url)
    if kind == "memory":
        raise InputError(
            "memory:// lives inside one process; the dashboard cannot see another's. Use a "
            "shared store, e.g. --url sqlite:///fairq.db"
        )
    if kind == "sqlite" and not (path := path_from_url(app.url)).exists():
        click.echo(
            f"no store at {redact_url(app.url)} yet (no file {path.resolve()}): the pages say "
            "so until a worker, or the first enqueue, makes it; if your store is elsewhere, "
            "give --url",
            err=True,
        )
    return app


def _listen(host: str, port: int) -> socket.socket:
    """Bind now, so a port in use is a clear error before anything starts."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise click.UsageError(f"cannot use --host {host!r}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise StoreError(
            f"cannot listen on {host}:{port}: {exc.strerror}; choose another --port"
        ) from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock
