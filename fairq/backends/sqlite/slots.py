"""Tenant slots (fairq/policy/slots.py) in the ``slots`` table, one row per slot held.

Each call runs in one ``BEGIN IMMEDIATE`` transaction (the backend's), so dropping expired
slots, counting and taking one is atomic across threads and processes. A (queue, tenant)
with no slot has no row; maintenance deletes expired rows (``slots_prune``). Jobs parked for
a slot are rows of ``slot_waiters`` (fairq/policy/slots.py: parking).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from fairq.backends.sqlite.sql import Q
from fairq.contract import (
    AcquireSlotParams,
    LeaveLineParams,
    ReleaseSlotsResult,
    RenewSlotsResult,
    SlotResult,
    Woken,
)
from fairq.policy import slots


def acquire(db: sqlite3.Connection, params: AcquireSlotParams) -> SlotResult:
    place = {"queue": params.queue, "tenant": params.tenant}
    asked = {**place, "place": params.waiter}
    if params.waiter is not None and db.execute(Q["waiter_get"], asked).fetchone() is None:
        return SlotResult(gone=True)
    db.execute(Q["slots_drop_expired"], {**place, "now": params.now})
    held = db.execute(Q["slots_held"], place).fetchone()
    setting = db.execute(Q["slot_setting"], place).fetchone()
    cap = slots.cap_of(
        params.limit, setting["own"] if setting["known"] else setting["queue_default"]
    )
    if not slots.free(held["held"], cap):
        if params.park is None:
            return SlotResult(free_at=held["free_at"])
        waiter = params.waiter or slots.new_waiter()
        args = {**place, "place": waiter, "park": params.park, "now": params.now}
        db.execute(Q["waiter_park"], args)
        return SlotResult(free_at=held["free_at"], waiter=waiter)
    if params.waiter is not None:
        db.execute(Q["waiter_delete"], {"place": params.waiter})
    key = slots.new_slot(params.queue, params.tenant)
    deadline = params.now + params.lease
    db.execute(
        Q["slot_insert"],
        {**place, "nonce": key.nonce, "holder": params.holder, "lease": params.lease,
         "deadline": deadline},
    )  # fmt: skip
    return SlotResult(token=slots.token_of(key), deadline=deadline)


def leave(db: sqlite3.Connection, params: LeaveLineParams) -> bool:
    asked = {"queue": params.queue, "tenant": params.tenant, "place": params.waiter}
    return db.execute(Q["waiter_leave"], asked).rowcount > 0


def renew(db: sqlite3.Connection, tokens: Sequence[str], now: float) -> RenewSlotsResult:
    deadlines: dict[str, float] = {}
    lost: list[str] = []
    for token in tokens:
        row = _held(db, token, now)
        if row is None:
            lost.append(token)
            continue
        deadline = now + row["lease"]
        db.execute(Q["slot_renew"], {"nonce": row["nonce"], "deadline": deadline})
        deadlines[token] = deadline
    return RenewSlotsResult(deadlines=deadlines, lost=lost)


def release(db: sqlite3.Connection, tokens: Sequence[str], now: float) -> ReleaseSlotsResult:
    released: list[str] = []
    lost: list[str] = []
    wake: list[Woken] = []
    for token in tokens:
        row = _held(db, token, now)
        if row is None:
            lost.append(token)
            continue
        db.execute(Q["slot_delete"], {"nonce": row["nonce"]})
        released.append(token)
        place = {"queue": row["queue"], "tenant": row["tenant"], "now": now}
        woken = db.execute(Q["waiter_wake"], place).fetchone()
        if woken is not None:
            wake.append(Woken(woken["place"], woken["park"]))
    return ReleaseSlotsResult(released=released, lost=lost, wake=wake)


def _held(db: sqlite3.Connection, token: str, now: float) -> sqlite3.Row | None:
    """The row of the slot a token holds, or None; an expired slot it names is deleted."""
    key = slots.parse_token(token)
    if key is None:
        return None
    row: sqlite3.Row | None = db.execute(Q["slot_get"], {"nonce": key.nonce}).fetchone()
    if row is None or (row["queue"], row["tenant"]) != (key.queue, key.tenant):
        return None
    if row["deadline"] <= now:
        db.execute(Q["slot_delete"], {"nonce": key.nonce})
        return None
    return row
