"""What every admin command shares: which store, how errors exit, how values are shown.

Exit codes follow click: 2 for bad input (nothing was changed), 1 for a store that cannot be
used. Every value that came from a user (tenant ids, job names, errors) is shown through
``safe_text``, so an id like ``[red]x`` or one holding an escape sequence prints as itself
and can never restyle or rewrite the terminal.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.text import Text

from fairq.app import DEFAULT_URL, App
from fairq.backends import check_url
from fairq.backends.sqlite.url import path_from_url
from fairq.cli.loader import load_app, rebind
from fairq.errors import (
    ConfigError,
    FairqError,
    InvalidTenant,
    JobArgumentsError,
    PayloadTooLarge,
    UnknownJob,
)
from fairq.reports.text import format_age as format_age  # shared with the dashboard
from fairq.urls import redact_url

F = TypeVar("F", bound=Callable[..., Any])

#: Width used when stdout is not a terminal (CI logs), so wide tables do not fold into mush.
PLAIN_WIDTH = 160
TABLE_TENANT_CHARS = 40


class InputError(click.ClickException):
    """The user asked for something invalid; nothing was changed."""

    exit_code = 2


class StoreError(click.ClickException):
    """The store could not be opened or used."""

    exit_code = 1


_INPUT_ERRORS = (ConfigError, UnknownJob, InvalidTenant, PayloadTooLarge, JobArgumentsError)


@contextmanager
def reported_errors() -> Iterator[None]:
    """Turn fairq's errors into click exits with the error's own message (which names the fix)."""
    try:
        yield
    except _INPUT_ERRORS as exc:
        raise InputError(str(exc)) from None
    except FairqError as exc:
        raise StoreError(f"{type(exc).__name__}: {exc}") from None


def store_options(fn: F) -> F:
    """``--url`` and ``--app``, the same on every command that touches a store."""
    fn = click.option(
        "--app",
        "app_ref",
        metavar="MODULE:ATTR",
        default=None,
        help="Your App (e.g. myproject.jobs:app), to use its job declarations and store. "
        "Without it, jobs are found by name among those a worker has published.",
    )(fn)
    fn = click.option(
        "--url",
        envvar="FAIRQ_URL",
        show_envvar=True,
        default=None,
        metavar="URL",
        help=f"The store, e.g. sqlite:///fairq.db. Default: $FAIRQ_URL, else {DEFAULT_URL} "
        "(or the --app's own store).",
    )(fn)
    return fn


def open_app(url: str | None, app_ref: str | None, *, existing: bool = False) -> App:
    """The App to work with: ``--app`` if given (rebound to ``--url`` when that differs).

    ``existing``: the command only reads (or changes what is stored), so a SQLite file that is
    not there is an error, not a new, empty store left behind in the working directory.
    """
    app = App(url) if app_ref is None else load_app(app_ref)
    if url is not None:
        app = rebind(app, url)
    err_console().print(Text(f"store: {redact_url(app.url)}", style="dim"))
    if existing and check_url(app.url) == "sqlite" and not path_from_url(app.url).exists():
        raise StoreError(
            f"no fairq store at {redact_url(app.url)} (no such file: "
            f"{Path.cwd() / path_from_url(app.url)}); point at yours with --url "
            "sqlite:///path/to/fairq.db or $FAIRQ_URL, or --app module:app"
        )
    return app


# -- output -----------------------------------------------------------------------------------


def out_console() -> Console:
    """stdout; plain (no colour, fixed width) when it is not a terminal."""
    return _console(stderr=False)


def err_console() -> Console:
    return _console(stderr=True)


def _console(*, stderr: bool) -> Console:
    probe = Console(stderr=stderr)
    if probe.is_terminal:
        return probe
    return Console(stderr=stderr, width=PLAIN_WIDTH, no_color=True, highlight=False)


def safe_text(value: str, limit: int | None = None) -> Text:
    """A user-supplied string as literal text: no markup, unprintables escaped, maybe shortened."""
    shown = "".join(ch if ch.isprintable() else _escape(ch) for ch in value)
    if limit is not None and len(shown) > limit:
        shown = shown[: limit - 1] + "…"
    return Text(shown)


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def format_time(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def format_cap(cap: int | None) -> str:
    return "none" if cap is None else str(cap)


def now() -> float:
    return time.time()


def new_queue_option(fn: F) -> F:
    """``--new-queue``: a change to a queue the store has never seen is refused without it."""
    return click.option(
        "--new-queue",
        is_flag=True,
        help="Allow a queue that neither the --app declares nor the store has seen (no job, "
        "tenant or setting yet): without it such a name is refused as a likely typo.",
    )(fn)


def refuse_unseen_queue(app: App, queue: str, allowed: bool) -> None:
    """A change to a queue nobody knows is most likely a typo: refuse it (exit 2, nothing
    changed) unless ``--new-queue`` says it is meant."""
    if allowed:
        return
    from fairq.app import unseen_queues

    # no SQLite file yet: every queue is new to the store, and asking it would make the file
    store = check_url(app.url) != "sqlite" or path_from_url(app.url).exists()
    if unseen_queues.unseen(app, [queue], store=store):
        raise InputError(
            f"{unseen_queues.describe(app, [queue], store=store)}; nothing was changed: pass "
            "--new-queue to set it anyway"
        )
