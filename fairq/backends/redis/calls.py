"""The arguments of the Lua functions and the meaning of their replies (beyond the records,
which records.py parses): key blocks, per-token arguments, answers, expired leases.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fairq.contract import AckManyResult, ExpiredLease, Keep
from fairq.errors import DuplicateJob
from fairq.job import NewJob, encode_headers

from .records import encode_body, num, text
from .scripts import Arg


def blocks(queues: Sequence[str]) -> dict[str, int]:
    """Number the distinct queues 1, 2, … in first-seen order (the scripts' key blocks)."""
    blocks: dict[str, int] = {}
    for queue in queues:
        blocks.setdefault(queue, len(blocks) + 1)
    return blocks


Routed = tuple[str, str | None, str, str]  # token, queue (None: unknown), job id, lease number


def held_args(routed: Sequence[Routed], blocks: dict[str, int]) -> list[Arg]:
    """The per-token arguments of ``each_held`` (_lib_jobs.lua) for the routed tokens."""
    args: list[Arg] = []
    for _, queue, job_id, attempt in routed:
        if queue is not None:
            args += [blocks[queue], job_id, attempt]
    return args


def answers(routed: Sequence[Routed], reply: Sequence[Any]) -> list[tuple[str, str]]:
    """Each token's answer from ``each_held``; '' for a lost lease (an unrouted one too)."""
    answers = iter(reply)
    return [(r[0], text(next(answers)) if r[1] is not None else "") for r in routed]


#: Values per expired lease in a reply: block, job id, job name, tenant, attempt, deadline,
#: dead (1 or 0): ``expire`` in _lib_jobs.lua.
EXPIRED_FIELDS = 7


def expired(names: dict[int, str], flat: Sequence[Any]) -> list[ExpiredLease]:
    """The expired leases of a dequeue's or maintain's reply, in the order expired."""
    return [
        ExpiredLease(
            job_id=text(flat[at + 1]),
            name=text(flat[at + 2]),
            queue=names[int(flat[at])],
            tenant=text(flat[at + 3]),
            attempt=int(flat[at + 4]),
            deadline=float(flat[at + 5]),
            dead=int(flat[at + 6]) == 1,
        )
        for at in range(0, len(flat), EXPIRED_FIELDS)
    ]


def ack_result(answers: list[tuple[str, str]]) -> AckManyResult:
    return AckManyResult(
        acked=[token for token, answer in answers if answer],
        lost=[token for token, answer in answers if not answer],
    )


def block_of(blocks: dict[str, int], job: NewJob, queue: str) -> int | str:
    """A job's block argument of enqueue.lua: its queue's, or a sharded job's shards' blocks,
    space-separated, best first (the script chooses among them)."""
    if job.shards:
        return " ".join(str(blocks[shard]) for shard in job.shards)
    return blocks[queue]


def job_args(block: int | str, job: NewJob, order: int) -> list[Arg]:
    """enqueue.lua's values of one job; ``order``: its place in the batch (from 0)."""
    return [
        block,
        job.id,
        encode_body(job.name, job.payload, encode_headers(job.headers)),
        job.tenant,
        job.priority,
        num(job.run_at),
        job.max_attempts,
        num(job.lease_timeout),
        num(job.cost),
        order,
    ]


def setting(value: object, form: Any) -> str:
    if isinstance(value, Keep):
        return "keep"
    if value is None:
        return ""
    return str(form(value))


def duplicate(ids: list[str]) -> DuplicateJob:
    return DuplicateJob(f"job ids already stored: {ids}; nothing was stored")
