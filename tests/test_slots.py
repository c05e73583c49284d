"""Slot tokens (fairq/policy/slots.py) and the reference model's slot memory."""

from __future__ import annotations

import pytest

from fairq.contract import AcquireSlotParams, MaintainParams, ReleaseSlotsParams, StatsParams
from fairq.model import ReferenceModel
from fairq.policy import slots


@pytest.mark.parametrize("tenant", ["a", "a:b:c", "{x}", "ü " * 50, "7"])
def test_a_token_names_its_queue_and_tenant_exactly(tenant: str) -> None:
    key = slots.new_slot("q.v2", tenant)
    assert slots.parse_token(slots.token_of(key)) == key
    assert key.nonce != slots.new_slot("q.v2", tenant).nonce


@pytest.mark.parametrize(
    "token", ["", "q", "q:abc:t", f"q:{'0' * 32}:", f"a b:{'0' * 32}:t", f"q:{'G' * 32}:t", 5]
)
def test_a_token_that_names_no_slot_parses_to_none(token: object) -> None:
    assert slots.parse_token(token) is None


def test_the_model_keeps_nothing_for_a_tenant_without_slots() -> None:
    model = ReferenceModel()

    def acquire(tenant: str, now: float) -> str:
        params = AcquireSlotParams(queue="q", tenant=tenant, holder="w", lease=5.0, now=now)
        token = model.acquire_slot(params).token
        assert token is not None
        return token

    token = acquire("a", 0.0)
    model.release_slots(ReleaseSlotsParams(tokens=[token], now=1.0))
    assert model._slots.places() == 0
    assert model.stats(StatsParams()) == []
    acquire("b", 0.0)
    acquire("c", 0.0)
    model.maintain(MaintainParams(now=5.0))  # both expired at 5
    assert model._slots.places() == 0
