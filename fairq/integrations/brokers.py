"""A peer's broker that did not take a released job, said in one line: which broker, what it
answered, and what to do about it (Celery's and Dramatiq's publishers).

RabbitMQ refuses with an AMQP reply code and text that py-amqp (Celery) and pika (Dramatiq)
both carry in the error's message: the fix is chosen from that text, the same for both. Any
other failure (refused or lost connection, a timeout) is an outage: the relay waits for the
broker at its host and port, the jobs staying in fairq.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from fairq.errors import FairqError
from fairq.instrument.logs import describe
from fairq.urls import redact_url


class BrokerRefused(FairqError, ConnectionError):
    """The peer's broker did not take a released job (the relay hands the job back to fairq and
    tries again); the message names the broker, its answer and the fix."""


def refusal(exc: BaseException, peer: str, url: str, queue: str) -> BrokerRefused:
    """The error to raise from a publish that failed with ``exc``."""
    said = _said(exc)
    return BrokerRefused(
        f"the {peer} broker {redact_url(url)} did not take a message for queue {queue!r} "
        f"({said}): {_fix(said, url, queue)}"
    )


def _said(exc: BaseException) -> str:
    """The error and the ones it wraps (Dramatiq's ConnectionClosed wraps pika's), once each."""
    parts: list[str] = []
    seen: BaseException | None = exc
    while seen is not None and len(parts) < 3:
        text = describe(seen)
        if not any(text in part or part in text for part in parts):
            parts.append(text)
        seen = seen.__cause__ or seen.__context__
    return "; ".join(parts)


def _fix(said: str, url: str, queue: str) -> str:
    parts = urlsplit(url)
    vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
    user = parts.username or "guest"
    text = said.lower()
    if "reserved prefix" in text:
        return f"rename queue {queue!r}: RabbitMQ reserves the names that start with 'amq.'"
    if "precondition_failed" in text or "inequivalent arg" in text:
        return (
            f"queue {queue!r} exists on the broker with other arguments than this publisher "
            "declares; declare it alike in the relay and the workers, or delete it "
            f"(rabbitmqctl delete_queue -p {vhost} {queue}) so it is made anew"
        )
    if "vhost" in text and ("not found" in text or "not_allowed" in text):
        return (
            f"create the vhost (rabbitmqctl add_vhost {vhost}; rabbitmqctl set_permissions -p "
            f"{vhost} {user} '.*' '.*' '.*') or fix the broker URL's /vhost"
        )
    if "login was refused" in text or "authentication" in text:
        return "check the user name and password in the broker URL"
    if "access_refused" in text:
        return (
            f"give user {user!r} permissions on vhost {vhost!r} "
            f"(rabbitmqctl set_permissions -p {vhost} {user} '.*' '.*' '.*')"
        )
    where = f"{parts.hostname or '127.0.0.1'}:{parts.port}" if parts.port else parts.netloc
    return f"waiting for the broker to answer at {where.rpartition('@')[2]}"
