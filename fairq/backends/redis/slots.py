"""Tenant slots (fairq/policy/slots.py): the arguments of the slot functions and their replies.

A slot lives in its queue's Cluster slot (``Layout.slot_keys``), so ``acquire_slot.lua`` reads
the queue's settings for the cap in the same atomic call; renewing and releasing take one call
per queue of the tokens (a token names its queue and tenant, so no lookup is needed first).
"""

from __future__ import annotations

from collections.abc import Sequence

from fairq.contract import AcquireSlotParams, SlotResult
from fairq.policy import slots

from .keys import Layout
from .records import num, text
from .scripts import Arg
from .throttling import Run


def acquire(
    run: Run, block: list[str], layout: Layout, params: AcquireSlotParams, now: str
) -> SlotResult:
    """``block``: the queue's keys (``RedisBackend._keys``); ``now`` as ``RedisBackend._at``."""
    key = slots.new_slot(params.queue, params.tenant)
    keys = [*block, *layout.slot_keys(params.queue, params.tenant)]
    limit = "" if params.limit is None else str(params.limit)
    args: list[Arg] = [now, params.tenant, key.nonce, params.holder, num(params.lease), limit]
    args += [params.waiter or "", params.park or "", slots.new_waiter()]
    args.append(str(int(slots.PARK_TTL * 1000)))
    answer = run("acquire_slot", params.queue, keys, args)
    deadline, free_at, place, gone = (text(v) for v in answer)
    if deadline:
        return SlotResult(token=slots.token_of(key), deadline=float(deadline))
    if gone:
        return SlotResult(gone=True)
    return SlotResult(free_at=float(free_at), waiter=place or None)


def each(run: Run, layout: Layout, op: str, tokens: Sequence[str], now: str) -> list[str]:
    """Run ``op`` (renew_slots, release_slots) over ``tokens``: each token's answer, in order,
    '' for one whose slot is not held (a token that names no slot too). The Lua takes a block
    of four slot keys per (queue, tenant), numbered as ``args`` name them."""
    answers = [""] * len(tokens)
    by_queue: dict[str, list[tuple[int, slots.SlotKey]]] = {}
    for at, token in enumerate(tokens):
        key = slots.parse_token(token)
        if key is not None:
            by_queue.setdefault(key.queue, []).append((at, key))
    for queue, named in by_queue.items():
        pairs: dict[str, int] = {}
        keys: list[str] = []
        args: list[Arg] = [now]
        for _, key in named:
            if key.tenant not in pairs:
                pairs[key.tenant] = len(pairs) + 1
                keys += layout.slot_keys(queue, key.tenant)
            args += [pairs[key.tenant], key.nonce]
        for (at, _), answer in zip(named, run(op, queue, keys, args), strict=True):
            answers[at] = text(answer)
    return answers
