"""Tenant slots (fairq/policy/slots.py) in the ``slots`` table, one row per slot held.

Each call runs in one ``BEGIN IMMEDIATE`` transaction (the backend's), so dropping expired
slots, counting and taking one is atomic across threads and processes. A (queue, tenant)
with no slot has no row; maintenance deletes expired rows (``slots_prune``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from fairq.backends.sqlite.sql import Q
from fairq.contract import AcquireSlotParams, ReleaseSlotsResult, RenewSlotsResult, SlotResult
from fairq.policy import slots


def acquire(db: sqlite3.Connection, params: AcquireSlotParams) -> SlotResult:
    place = {"queue": params.queue, "tenant": params.tenant}
    db.execute(Q["slots_drop_expired"], {**place, "now": params.now})
    held = db.execute(Q["slots_held"], place).fetchone()
    setting = db.execute(Q["slot_setting"], place).fetchone()
    cap = slots.cap_of(
        params.limit, setting["own"] if setting["known"] else setting["queue_default"]
    )
    if not slots.free(held["held"], cap):
        return SlotResult(free_at=held["free_at"])
    key = slots.new_slot(params.queue, params.tenant)
    deadline = params.now + params.lease
    db.execute(
        Q["slot_insert"],
        {**place, "nonce": key.nonce, "holder": params.holder, "lease": params.lease,
         "deadline": deadline},
    )  # fmt: skip
    return SlotResult(token=slots.token_of(key), deadline=deadline)


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
    for token in tokens:
        row = _held(db, token, now)
        if row is None:
            lost.append(token)
        else:
            db.execute(Q["slot_delete"], {"nonce": row["nonce"]})
            released.append(token)
    return ReleaseSlotsResult(released=released, lost=lost)


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
