"""The arguments of the Lua functions and the meaning of their replies (beyond the records,
which records.py parses): key blocks, per-token arguments, answers, expired leases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fairq.contract import (
    AckManyResult,
    EnqueueResult,
    ExpiredLease,
    HeartbeatResult,
    Keep,
)
from fairq.errors import ConfigError, DuplicateJob, PayloadTooLarge
from fairq.job import NewJob, check_distinct, encode_headers
from fairq.results import JobResult

from .keys import Layout
from .records import encode_body, num, text
from .scripts import Arg

PRIORITY_RANGE = range(-(2**31), 2**31)


def check_jobs(jobs: Sequence[NewJob], max_payload_bytes: int) -> None:
    """What this store refuses of an enqueue's jobs, before anything is sent."""
    check_distinct(jobs)
    for job in jobs:
        size = len(job.payload.encode("utf-8"))
        if size > max_payload_bytes:
            raise PayloadTooLarge(
                f"job {job.id!r} has a payload of {size} bytes, over this Redis store's "
                f"limit of {max_payload_bytes} bytes; store large data "
                "elsewhere and pass a reference, or raise ?max_payload_bytes= in the URL"
            )
        if job.priority not in PRIORITY_RANGE:
            raise ConfigError(f"priority must fit in 32 bits, got {job.priority}")
        if not job.tenant:
            raise ConfigError(f"job {job.id!r} has an empty tenant")


def blocks(queues: Sequence[str]) -> dict[str, int]:
    """Number the distinct queues 1, 2, … in first-seen order (the scripts' key blocks)."""
    blocks: dict[str, int] = {}
    for queue in queues:
        blocks.setdefault(queue, len(blocks) + 1)
    return blocks


Routed = tuple[str, str | None, str, str]  # token, queue (None: unknown), job id, lease number


def held_args(routed: Sequence[Routed], blocks: dict[str, int]) -> list[Arg]:
    """The per-token arguments of ``each_held`` (_lib_leases.lua) for the routed tokens."""
    args: list[Arg] = []
    for _, queue, job_id, attempt in routed:
        if queue is not None:
            args += [blocks[queue], job_id, attempt]
    return args


def hold_arg(hold: float | None) -> Arg:
    """A relay's hold (DequeueParams.hold, HeartbeatParams.hold) as ARGV: '' for none."""
    return "" if hold is None else num(hold)


def answers(routed: Sequence[Routed], reply: Sequence[Any]) -> list[tuple[str, str]]:
    """Each token's answer from ``each_held``; '' for a lost lease (an unrouted one too)."""
    answers = iter(reply)
    return [(r[0], text(next(answers)) if r[1] is not None else "") for r in routed]


#: Values per expired lease in a reply: block, job id, job name, tenant, attempt, deadline,
#: dead (1, or 2: cancelled, or 0), claimed (1, or 0: a relayed job's hold lapsed):
#: ``expire`` in _lib_maintenance.lua.
EXPIRED_FIELDS = 8


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
            cancelled=int(flat[at + 6]) == 2,
            claimed=int(flat[at + 7]) == 1,
        )
        for at in range(0, len(flat), EXPIRED_FIELDS)
    ]


def result_args(routed: Sequence[Routed], results: Mapping[str, JobResult]) -> list[Arg]:
    """ack_many.lua's results: how many, then job id, value, seconds kept for each token of
    ``routed`` that has one."""
    args: list[Arg] = [0]
    if results:
        for token, queue, job_id, _ in routed:
            result = results.get(token)
            if result is not None and queue is not None:
                args += [job_id, result.value, num(result.keep)]
        args[0] = (len(args) - 1) // 3
    return args


def heartbeat_result(answers: list[tuple[str, str]]) -> HeartbeatResult:
    """heartbeat.lua's answers: a deadline ('c' first: the job has a cancel request), 'k' (a
    held lease a worker claimed: left as it was) or '' (lost)."""
    return HeartbeatResult(
        deadlines={
            token: float(answer.lstrip("c")) for token, answer in answers if answer not in ("", "k")
        },
        lost=[token for token, answer in answers if not answer],
        cancelled=[token for token, answer in answers if answer.startswith("c")],
        claimed=[token for token, answer in answers if answer == "k"],
    )


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
        "1" if job.learn_cost else "0",
    ]


def unique_args(layout: Layout, jobs: Sequence[NewJob]) -> tuple[list[str], list[Arg]]:
    """The unique keys of a batch (KEYS after its queue blocks) and enqueue.lua's unique
    section of ARGV (_lib_unique.lua): their count, then index, window, hold of each."""
    keys: list[str] = []
    args: list[Arg] = [0]
    for i, job in enumerate(jobs):
        if job.unique is not None:
            keys.append(layout.unique_key(job.queue, job.tenant, job.unique.key))
            args += [i, num(job.unique.window), "1" if job.unique.hold else "0"]
    args[0] = len(keys)
    return keys, args


def enqueued(names: list[str], count: int, reply: Sequence[Any]) -> EnqueueResult:
    """An enqueue's 'ok' reply: each job's block (0: its key was held), then index, id and
    queue of each job holding a key."""
    queues = [names[int(block) - 1] if int(block) else "" for block in reply[1 : count + 1]]
    existing: dict[int, str] = {}
    rest = reply[count + 1 :]
    for at in range(0, len(rest), 3):
        index = int(rest[at])
        existing[index] = text(rest[at + 1])
        queues[index] = text(rest[at + 2])
    return EnqueueResult(queues=queues, existing=dict(sorted(existing.items())))


def setting(value: object, form: Any) -> str:
    if isinstance(value, Keep):
        return "keep"
    if value is None:
        return ""
    return str(form(value))


def duplicate(ids: list[str], stored: list[str] | None = None) -> DuplicateJob:
    """``stored``: the batch's jobs other Cluster slots' calls stored before the refusal."""
    done = "nothing was stored"
    if stored:
        done = f"the batch's jobs in other slots were stored: {stored}"
    return DuplicateJob(f"job ids already stored: {ids}; {done}")
