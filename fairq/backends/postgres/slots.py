"""Tenant slots (fairq/policy/slots.py) in the ``slots`` table, one row per slot held.

Every call takes the advisory lock of each (queue, tenant) it touches first (``slots_lock``,
in key order), then its rows: acquires, renewals and releases of one tenant in one queue are
so one serial order, and no two calls wait on each other in a cycle. Maintenance deletes
expired rows without waiting for any (``slots_prune``). A (queue, tenant) with no slot has
no row, and no lock outlives its transaction. Jobs parked for a slot are rows of
``slot_waiters``, read and written under the same lock (fairq/policy/slots.py: parking).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from psycopg import Cursor

from fairq.backends._sql import Queries
from fairq.backends.postgres.records import Row, tenant_key
from fairq.contract import (
    AcquireSlotParams,
    LeaveLineParams,
    ReleaseSlotsResult,
    RenewSlotsResult,
    SlotResult,
    Woken,
)
from fairq.policy import slots

#: How many expired slots one maintenance deletes at most (the rest go next time).
PRUNE_BATCH = 1000


def lock_key(seed: int, queue: str, tenant: str) -> int:
    """The advisory lock of a (queue, tenant)'s slots: 64 bits of a digest of the schema's seed,
    the queue and the tenant (queue names hold no NUL)."""
    text = f"slots\0{seed}\0{queue}\0".encode() + tenant_key(tenant)
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big", signed=True)


def acquire(cur: Cursor[Row], q: Queries, seed: int, params: AcquireSlotParams) -> SlotResult:
    lock = lock_key(seed, params.queue, params.tenant)
    (locked,) = cur.execute(q["slots_lock"], {"keys": [lock], "now": params.now}).fetchall()
    key = slots.new_slot(params.queue, params.tenant)
    place = {"queue": params.queue, "tenant": params.tenant, "key": tenant_key(params.tenant)}
    asked = {**place, "place": params.waiter}
    if params.waiter is not None and not cur.execute(q["waiter_get"], asked).fetchall():
        return SlotResult(gone=True)
    args = {
        **place,
        "now": float(locked["now"]),
        "limit": params.limit,
        "nonce": key.nonce,
        "holder": params.holder,
        "lease": params.lease,
    }
    (row,) = cur.execute(q["slot_acquire"], args).fetchall()
    if row["deadline"] is None:
        if params.park is None:
            return SlotResult(free_at=row["free_at"])
        waiter = params.waiter or slots.new_waiter()
        parked = {**place, "place": waiter, "park": params.park, "now": args["now"]}
        cur.execute(q["waiter_park"], parked)
        return SlotResult(free_at=row["free_at"], waiter=waiter)
    if params.waiter is not None:
        cur.execute(q["waiter_delete"], {"place": params.waiter})
    return SlotResult(token=slots.token_of(key), deadline=row["deadline"])


def leave(cur: Cursor[Row], q: Queries, seed: int, params: LeaveLineParams) -> bool:
    lock = lock_key(seed, params.queue, params.tenant)
    cur.execute(q["slots_lock"], {"keys": [lock], "now": None}).fetchall()
    asked = {"queue": params.queue, "tenant": params.tenant, "place": params.waiter}
    return cur.execute(q["waiter_leave"], asked).rowcount > 0


def renew(
    cur: Cursor[Row], q: Queries, seed: int, tokens: Sequence[str], now: float
) -> RenewSlotsResult:
    held, now = _held(cur, q, seed, tokens, now)
    deadlines: dict[str, float] = {}
    lost: list[str] = []
    renewed: dict[str, float] = {}
    for token, row in zip(tokens, held, strict=True):
        if row is None:
            lost.append(token)
        else:
            deadlines[token] = renewed[row["nonce"]] = now + row["lease"]
    if renewed:
        args = {"nonces": list(renewed), "deadlines": list(renewed.values())}
        cur.execute(q["slots_renew"], args)
    return RenewSlotsResult(deadlines=deadlines, lost=lost)


def release(
    cur: Cursor[Row], q: Queries, seed: int, tokens: Sequence[str], now: float
) -> ReleaseSlotsResult:
    held, now = _held(cur, q, seed, tokens, now)
    released: list[str] = []
    lost: list[str] = []
    gone: set[str] = set()
    wake: list[Woken] = []
    for token, row in zip(tokens, held, strict=True):
        if row is None or row["nonce"] in gone:
            lost.append(token)
            continue
        gone.add(row["nonce"])
        released.append(token)
        place = {"queue": row["queue"], "tenant": row["tenant"], "key": tenant_key(row["tenant"])}
        wake += [
            Woken(w["place"], w["park"])
            for w in cur.execute(q["waiter_wake"], {**place, "now": now})
        ]
    if gone:
        cur.execute(q["slots_delete"], {"nonces": sorted(gone)})
    return ReleaseSlotsResult(released=released, lost=lost, wake=wake)


def _held(
    cur: Cursor[Row], q: Queries, seed: int, tokens: Sequence[str], now: float
) -> tuple[list[Row | None], float]:
    """Each token's slot row if it holds it (None: lost), and the event's time. Expired rows
    a token names are deleted on the way."""
    keys = [slots.parse_token(token) for token in tokens]
    named = [key for key in keys if key is not None]
    locks = sorted({lock_key(seed, key.queue, key.tenant) for key in named})
    (locked,) = cur.execute(q["slots_lock"], {"keys": locks, "now": now}).fetchall()
    now = float(locked["now"])
    nonces = sorted({key.nonce for key in named})
    rows = {row["nonce"]: row for row in cur.execute(q["slots_get"], {"nonces": nonces})}
    expired = sorted(n for n, row in rows.items() if row["deadline"] <= now)
    if expired:
        cur.execute(q["slots_delete"], {"nonces": expired})
    held: list[Row | None] = []
    for key in keys:
        row = rows.get(key.nonce) if key is not None else None
        if (
            key is None
            or row is None
            or (row["queue"], row["tenant"]) != (key.queue, key.tenant)
            or row["deadline"] <= now
        ):
            held.append(None)
        else:
            held.append(row)
    return held, now


def prune(cur: Cursor[Row], q: Queries, now: float) -> int:
    """Delete expired slots (bounded work per call), and lines of waiters nobody came back to."""
    cur.execute(q["waiters_prune"], {"before": now - slots.PARK_TTL})
    return cur.execute(q["slots_prune"], {"now": now, "limit": PRUNE_BATCH}).rowcount
