"""A queue's settings: a change names the settings it changes, and every other stays as stored
(read and written by the store in one step), on every store."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fairq.contract import QUEUE_SETTINGS, Backend, GetQueueParams, QueueSettings, SetQueueParams
from fairq.errors import ConfigError
from fairq.policy.rate import Rate

from .helpers import Q, enqueue, new_jobs, stat, take

#: Every setting away from its default, then each one's other value (None: removed).
FIRST = QueueSettings(queue=Q, weight=2.0, max_running=4, rate=Rate(10, 1.0, 3), half_life=30.0,
                      max_debt=5.0, max_in_flight=8)  # fmt: skip
OTHER: dict[str, object] = {"weight": 0.5, "max_running": None, "rate": None,
                            "half_life": None, "max_debt": 7.5, "max_in_flight": 20}  # fmt: skip


def settings(backend: Backend) -> QueueSettings:
    return backend.get_queue(GetQueueParams(queue=Q))


def change(backend: Backend, now: float, **named: object) -> None:
    """Change only the settings ``named``; the values of the others are nonsense on purpose,
    so a store that read them instead of keeping what it has fails."""
    placeholder = QueueSettings(queue=Q, weight=99.0, max_running=99, rate=Rate(99, 1.0),
                                half_life=99.0, max_debt=99.0, max_in_flight=99)  # fmt: skip
    asked = replace(placeholder, **named)  # type: ignore[arg-type]
    backend.set_queue(SetQueueParams.changing(asked, now, named))


@pytest.mark.parametrize("name", QUEUE_SETTINGS)
def test_a_change_to_one_setting_keeps_every_other(backend: Backend, name: str) -> None:
    backend.set_queue(SetQueueParams(settings=FIRST, now=0.0))
    change(backend, 1.0, **{name: OTHER[name]})
    assert settings(backend) == replace(FIRST, **{name: OTHER[name]})  # type: ignore[arg-type]
    change(backend, 2.0, **{name: getattr(FIRST, name)})
    assert settings(backend) == FIRST


def test_a_change_to_a_queue_never_set_keeps_the_defaults(backend: Backend) -> None:
    change(backend, 0.0, max_in_flight=5)
    assert settings(backend) == QueueSettings(queue=Q, max_in_flight=5)


def test_the_kept_defaults_still_govern_the_tenants(backend: Backend) -> None:
    """The tenants are resettled with the settings kept, not with the call's placeholders."""
    backend.set_queue(SetQueueParams(settings=FIRST, now=0.0))
    enqueue(backend, new_jobs("a", range(6)))
    change(backend, 0.0, max_in_flight=20)
    row = stat(backend, "a")
    assert (row.weight, row.max_running, row.rate) == (2.0, 4, Rate(10, 1.0, 3))
    assert len(take(backend, limit=6)) == 3  # the rate's burst of 3 (the cap is 4)


def test_keep_names_only_settings_a_queue_has() -> None:
    with pytest.raises(ConfigError, match="colour, which a queue does not have"):
        SetQueueParams(settings=FIRST, now=0.0, keep=frozenset({"colour"}))
