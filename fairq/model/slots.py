"""The model's tenant slots (fairq/policy/slots.py): the rules as plain Python, no I/O.

Slots are kept per (queue, tenant) only while some are held, so a tenant that holds none
costs nothing; expired slots go at the tenant's next acquire, at a release or renew naming
them, and at maintenance. Jobs parked for a slot wait in a line per (queue, tenant).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fairq.contract import (
    AcquireSlotParams,
    LeaveLineParams,
    ReleaseSlotsResult,
    RenewSlotsResult,
    SlotResult,
    Woken,
)
from fairq.policy import slots


@dataclass
class Slot:
    holder: str
    lease: float
    deadline: float


@dataclass
class Waiter:
    since: float
    park: str
    touched: float
    woken: bool = False


class SlotTable:
    """Every slot held, by (queue, tenant), then by nonce."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, str], dict[str, Slot]] = {}
        self._waiters: dict[str, tuple[tuple[str, str], Waiter]] = {}  # by place in line

    def acquire(self, params: AcquireSlotParams, setting: int | None) -> SlotResult:
        """``setting``: the tenant's effective max_running in the queue (None: no cap)."""
        place = (params.queue, params.tenant)
        if params.waiter is not None and self._waiters.get(params.waiter, (None,))[0] != place:
            return SlotResult(gone=True)
        held = self._held.get(place, {})
        for nonce in [n for n, slot in held.items() if slot.deadline <= params.now]:
            del held[nonce]
        cap = slots.cap_of(params.limit, setting)
        if not slots.free(len(held), cap):
            self._store(place, held)
            free_at = min(slot.deadline for slot in held.values())
            if params.park is None:
                return SlotResult(free_at=free_at)
            waiter = params.waiter or slots.new_waiter()
            known = self._waiters.get(waiter)
            since = known[1].since if known else params.now
            self._waiters[waiter] = (place, Waiter(since, params.park, params.now))
            return SlotResult(free_at=free_at, waiter=waiter)
        if params.waiter is not None:
            del self._waiters[params.waiter]
        key = slots.new_slot(params.queue, params.tenant)
        deadline = params.now + params.lease
        held[key.nonce] = Slot(holder=params.holder, lease=params.lease, deadline=deadline)
        self._store(place, held)
        return SlotResult(token=slots.token_of(key), deadline=deadline)

    def leave(self, params: LeaveLineParams) -> bool:
        """Take the waiter out of its line; False when it was not in it (LeaveLineParams)."""
        if self._waiters.get(params.waiter, (None,))[0] != (params.queue, params.tenant):
            return False
        del self._waiters[params.waiter]
        return True

    def renew(self, tokens: Sequence[str], now: float) -> RenewSlotsResult:
        deadlines: dict[str, float] = {}
        lost: list[str] = []
        for token in tokens:
            found = self._find(token, now)
            if found is None:
                lost.append(token)
            else:
                slot = found[2]
                slot.deadline = now + slot.lease
                deadlines[token] = slot.deadline
        return RenewSlotsResult(deadlines=deadlines, lost=lost)

    def release(self, tokens: Sequence[str], now: float) -> ReleaseSlotsResult:
        released: list[str] = []
        lost: list[str] = []
        wake: list[Woken] = []
        for token in tokens:
            found = self._find(token, now)
            if found is None:
                lost.append(token)
            else:
                self._drop(found[0], found[1])
                released.append(token)
                wake += self._wake(found[0], now)
        return ReleaseSlotsResult(released=released, lost=lost, wake=wake)

    def _wake(self, place: tuple[str, str], now: float) -> list[Woken]:
        """The park text of the oldest wakeable waiter of ``place``, now woken (or none)."""
        line = [(w.since, n, w) for n, (at, w) in self._waiters.items() if at == place]
        line = [entry for entry in line if not entry[2].woken]
        if not line:
            return []
        _, waiter, first = min(line, key=lambda entry: entry[:2])
        first.woken, first.touched = True, now
        return [Woken(waiter, first.park)]

    def sweep(self, now: float) -> None:
        """Forget every expired slot, and lines nobody came back to (maintenance)."""
        for waiter, (_, w) in list(self._waiters.items()):
            if w.touched <= now - slots.PARK_TTL:
                del self._waiters[waiter]
        for place, held in list(self._held.items()):
            self._store(place, {n: s for n, s in held.items() if s.deadline > now})

    def _find(self, token: str, now: float) -> tuple[tuple[str, str], str, Slot] | None:
        """(queue and tenant, nonce, slot) of the slot a token holds, or None; an expired
        slot it names is forgotten on the way."""
        key = slots.parse_token(token)
        if key is None:
            return None
        place = (key.queue, key.tenant)
        slot = self._held.get(place, {}).get(key.nonce)
        if slot is None:
            return None
        if slot.deadline <= now:
            self._drop(place, key.nonce)
            return None
        return place, key.nonce, slot

    def _drop(self, place: tuple[str, str], nonce: str) -> None:
        held = self._held[place]
        del held[nonce]
        self._store(place, held)

    def _store(self, place: tuple[str, str], held: dict[str, Slot]) -> None:
        if held:
            self._held[place] = held
        else:
            self._held.pop(place, None)

    def places(self) -> int:
        """How many (queue, tenant)s have slots stored (for tests of what is left behind)."""
        return len(self._held)
