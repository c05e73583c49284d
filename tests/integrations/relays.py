"""A relay run in the test's own process (its log then is caplog's), for the tests that read
what the relay says (the Celery and Dramatiq RabbitMQ tests)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from fairq.contract import Backend
from fairq.relay import Publisher, Relay


@contextmanager
def relay_thread(
    backend: Backend, publisher: Publisher, queues: Sequence[str], **options: Any
) -> Iterator[Relay]:
    relay = Relay(backend, publisher, queues, **options)
    thread = threading.Thread(target=relay.run, daemon=True)
    thread.start()
    try:
        yield relay
    finally:
        relay.stop()
        thread.join(timeout=30)


def relay_lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    """What the relay logged that holds ``text``."""
    found = [r.getMessage() for r in caplog.records if r.name == "fairq.relay"]
    return [line for line in found if text in line]
