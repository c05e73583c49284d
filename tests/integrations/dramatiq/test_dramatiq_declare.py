"""Declaring fair actors (no processes): retries mapped from Dramatiq's settings, the broker's
Retries taken over, the queues a relay releases, and the mistakes refused at declaration."""

from __future__ import annotations

from pathlib import Path

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import Retries

from fairq import Throttle
from fairq.errors import ConfigError
from fairq.integrations.dramatiq import FairActor, FairDramatiq, FairRetries
from fairq.relay import RelaySource


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fairq.db'}"


def test_retries_follow_dramatiq_settings_and_the_broker_s_retries_is_taken_over(url: str) -> None:
    broker = StubBroker(middleware=[Retries(max_retries=4, min_backoff=2000)])
    fair = FairDramatiq(broker, url=url)
    assert type(broker.middleware[0]) is FairRetries
    assert fair.retries is broker.middleware[0]
    assert (fair.retries.max_retries, fair.retries.min_backoff) == (4, 2000)

    @fair.actor(tenant="t")
    def defaults(t: str) -> None: ...

    @fair.actor(tenant="t", max_retries=0, min_backoff=250)
    def own(t: str) -> None: ...

    assert (defaults.job.max_attempts, defaults.job.retry_base) == (5, 2.0)
    assert (own.job.max_attempts, own.job.retry_base) == (1, 0.25)
    fair.app.close()


def test_a_broker_without_retries_gives_one_attempt(url: str) -> None:
    fair = FairDramatiq(StubBroker(middleware=[]), url=url)

    @dramatiq.actor(actor_class=FairActor, broker=fair.broker, fair_tenant="t", queue_name="q")
    def once(t: str) -> None: ...

    assert isinstance(once, FairActor)
    assert once.job.max_attempts == 1
    assert fair.relay_queues() == ["q"]
    fair.app.close()


def test_a_custom_retries_middleware_is_refused(url: str) -> None:
    class MyRetries(Retries):
        pass

    with pytest.raises(ConfigError, match="MyRetries would retry fair messages"):
        FairDramatiq(StubBroker(middleware=[MyRetries()]), url=url)


def test_relay_queues_are_the_fair_actors_and_their_throttle_queues(url: str) -> None:
    broker = StubBroker()
    fair = FairDramatiq(broker, url=url)
    assert isinstance(fair, RelaySource)
    fair.app.queue("imports_slow", weight=0.5)
    slow = [Throttle(threshold=100, per=60, queue="imports_slow")]

    @fair.actor(tenant="t", queue_name="imports", throttle=slow)
    def imports(t: str) -> None: ...

    @fair.actor(tenant="t", queue_name="reports")
    def reports(t: str) -> None: ...

    @dramatiq.actor(queue_name="plain", broker=broker)
    def plain() -> None: ...

    assert fair.relay_queues() == ["imports", "imports_slow", "reports"]
    fair.app.close()


def test_declaration_mistakes_are_refused_and_leave_no_actor(url: str) -> None:
    broker = StubBroker()
    fair = FairDramatiq(broker, url=url)
    with pytest.raises(ConfigError, match="already has a FairDramatiq"):
        FairDramatiq(broker, url=url)
    with pytest.raises(ConfigError, match="max_retries must be a whole number"):

        @fair.actor(tenant="t", max_retries=None)
        def endless(t: str) -> None: ...

    assert "endless" not in broker.actors
    with pytest.raises(ConfigError, match="lease"):

        @fair.actor(tenant="t", lease=-1)
        def negative(t: str) -> None: ...

    with pytest.raises(ValueError, match="fair_tenantt"):

        @dramatiq.actor(actor_class=FairActor, broker=broker, fair_tenantt="t")
        def typo(t: str) -> None: ...

    fair.app.close()


def test_without_dramatiq_the_import_names_the_extra_and_the_core_never_imports_it() -> None:
    import subprocess
    import sys

    blocked = "import sys; sys.modules['dramatiq'] = None; import fairq.integrations.dramatiq"
    failed = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True)
    assert failed.returncode != 0
    assert "pip install 'fairq[dramatiq]'" in failed.stderr
    core = "import sys, fairq, fairq.relay, fairq.cli; assert 'dramatiq' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", core]).returncode == 0
