"""A broker outage while the relay runs: it logs once, hands the jobs back to fairq, retries
with back-off, and carries on when the broker is back; nothing is lost or sent twice."""

from __future__ import annotations

import logging
import threading
from urllib.parse import urlsplit, urlunsplit

import pytest

from fairq.relay import Relay

from ..broker_proxy import Proxy
from .conftest import Setup, wait_done, wait_for
from .proj import build

pytestmark = pytest.mark.processes


def test_a_broker_outage_loses_nothing(
    redis_setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    setup = redis_setup
    broker = urlsplit(setup.broker)
    proxy = Proxy((broker.hostname or "127.0.0.1", broker.port or 6379))
    through = urlunsplit(broker._replace(netloc=f"127.0.0.1:{proxy.port}"))
    relayed = build(setup.url, through)  # the relay's side publishes through the proxy
    relay = Relay(relayed.fair.app.backend, relayed.fair.publisher(), [setup.queue], in_flight=2)
    thread = threading.Thread(target=relay.run, daemon=True)
    caplog.set_level(logging.INFO, logger="fairq.relay")
    project, queue = setup.project, setup.queue

    def enqueue(tags: range) -> list[str]:
        return [
            project.record.apply_async(("acme", f"j{i}", setup.log), queue=queue).id for i in tags
        ]

    try:
        setup.worker(concurrency=2)
        thread.start()
        before = enqueue(range(3))
        wait_done(project.fair.app, before)
        proxy.down()
        during = enqueue(range(3, 9))
        wait_for(lambda: proxy.refused >= 5, "the relay to try the broker again and again")
        assert not any(tag in setup.started_tags() for tag in (f"j{i}" for i in range(3, 9)))
        proxy.up()
        wait_done(project.fair.app, during)
    finally:
        relay.stop()
        thread.join(timeout=30)
        relayed.fair.app.close()
        proxy.close()
    assert sorted(setup.started_tags()) == sorted(f"j{i}" for i in range(9))  # each once
    for job_id in before + during:
        info = project.fair.app.job_info(job_id)
        assert info is not None and info.attempts == 1  # a job handed back spent no attempt
    messages = [r.getMessage() for r in caplog.records if r.name == "fairq.relay"]
    assert sum("the broker did not take job" in m for m in messages) == 1, messages
    assert sum("the broker takes jobs again" in m for m in messages) == 1, messages
