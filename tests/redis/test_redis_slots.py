"""Tenant slots on Redis: two keys per (queue, tenant) while it holds a slot, in the queue's
Cluster slot, the tenant hex-encoded; they expire with the last deadline and go with the last
slot; a call sent again after its reply was lost acts once."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import pytest
import redis
from redis_helpers import CuttingProxy

from fairq.backends.redis import RedisBackend
from fairq.backends.redis.keys import key_slot
from fairq.backends.redis.scripts import library
from fairq.contract import (
    AcquireSlotParams,
    MaintainParams,
    ReleaseSlotsParams,
    RenewSlotsParams,
    SlotResult,
)

TENANT = "{x}:y z"  # a brace, a colon and a space: none of it may reach a key name


def acquire(
    backend: RedisBackend, now: float, *, tenant: str = TENANT, limit: int = 2
) -> SlotResult:
    return backend.acquire_slot(
        AcquireSlotParams(
            queue="default", tenant=tenant, holder="w1", lease=30.0, now=now, limit=limit
        )
    )


def slot_keys(raw: redis.Redis, backend: RedisBackend) -> list[bytes]:
    return sorted(raw.keys(f"{backend.layout.prefix}:*slot*"))


def test_a_tenant_holds_two_keys_in_its_queues_slot_while_it_holds_slots(
    make_backend: Callable[..., RedisBackend], raw: redis.Redis
) -> None:
    backend = make_backend()
    first = acquire(backend, 0.0).token
    second = acquire(backend, 1.0).token
    assert first and second
    keys = slot_keys(raw, backend)
    hexed = TENANT.encode().hex().encode()
    assert [key.rsplit(b":", 2)[-2:] for key in keys] == [[b"slotinfo", hexed], [b"slots", hexed]]
    assert {key_slot(key) for key in keys} == {
        key_slot(backend.layout.queue_key("default", "meta"))
    }
    assert all(0 < raw.pttl(key) <= 31_000 for key in keys)  # the last deadline, 31 s away
    backend.release_slots(ReleaseSlotsParams(tokens=[first], now=2.0))
    assert len(slot_keys(raw, backend)) == 2
    backend.release_slots(ReleaseSlotsParams(tokens=[second], now=2.0))
    assert slot_keys(raw, backend) == []  # nothing left for a tenant without slots


def test_expired_slots_are_dropped_and_their_keys_deleted(
    make_backend: Callable[..., RedisBackend], raw: redis.Redis
) -> None:
    backend = make_backend()
    held = acquire(backend, 0.0).token
    assert held is not None
    renewed = backend.renew_slots(RenewSlotsParams(tokens=[held], now=40.0))
    assert list(renewed.lost) == [held]  # expired at 30: dropped on the way
    assert slot_keys(raw, backend) == []
    acquire(backend, 50.0, tenant="other")
    backend.maintain(MaintainParams(now=100.0))  # maintenance leaves them to their TTL
    assert len(slot_keys(raw, backend)) == 2


@pytest.fixture
def proxy(redis_url: str, raw: redis.Redis) -> Iterator[CuttingProxy]:
    cutter = CuttingProxy(urlsplit(redis_url).port or 6379, marker=b"")
    yield cutter
    cutter.close()


@pytest.fixture
def cut(proxy: CuttingProxy, redis_url: str, prefix: str) -> Iterator[RedisBackend]:
    database = urlsplit(redis_url).path or "/0"
    backend = RedisBackend.from_url(
        f"redis://127.0.0.1:{proxy.port}{database}?prefix={prefix}&clock=caller"
    )
    yield backend
    backend.close()


def arm(proxy: CuttingProxy, op: str) -> None:
    """Cut the connection right after the next call of ``op`` reaches the server."""
    proxy.marker = library().function(op).encode() + b"\r\n"
    proxy.armed.set()


def test_slot_calls_sent_again_after_their_reply_was_lost_act_once(
    cut: RedisBackend, proxy: CuttingProxy
) -> None:
    acquire(cut, 0.0, tenant="warm-up")  # loads the library
    arm(proxy, "acquire_slot")
    first = acquire(cut, 1.0)
    assert proxy.cuts == 1 and first.token is not None and first.deadline == 31.0
    assert acquire(cut, 1.0).granted
    assert acquire(cut, 1.0) == SlotResult(free_at=31.0)  # two held: the re-send took none
    arm(proxy, "renew_slots")
    renewed = cut.renew_slots(RenewSlotsParams(tokens=[first.token], now=5.0))
    assert proxy.cuts == 2 and dict(renewed.deadlines) == {first.token: 35.0}
    arm(proxy, "release_slots")
    released = cut.release_slots(ReleaseSlotsParams(tokens=[first.token], now=6.0))
    assert proxy.cuts == 3 and (list(released.released), list(released.lost)) == ([first.token], [])
    assert acquire(cut, 7.0).granted
