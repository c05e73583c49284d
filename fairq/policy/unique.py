"""Unique jobs: when an enqueue finds its key held, and what it gets instead (docs/unique.md).

A job may carry a unique key (``fairq.job.Unique``). Its scope is the job's queue as enqueued
(for a sharded queue, the tenant's first shard: the same for every enqueue of the tenant) and
its tenant: the same key in another queue or of another tenant is another key. A store keeps,
per key, the id of the job that took it, the job's queue, when the key's window ends, and
whether it holds for the whole window. A later enqueue with the key stores nothing and gets
that job's id while the key ``is_held``; otherwise it stores its job and takes the key.

Nothing needs to release a key: whether it holds is read from the job's state at the next
enqueue, so acks, failures and expiries never touch keys. A key whose window ended is taken
over by the next enqueue, and maintenance deletes the others.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fairq.errors import ConfigError

if TYPE_CHECKING:
    from fairq.job import NewJob

#: The longest unique key (a key is kept in an index and in Redis key names): hash longer ones.
MAX_KEY_CHARS = 1024

#: The states of a job that still holds its key: not yet run, or running. A retry waits as
#: scheduled, so a job keeps its key through its retries; a dead or succeeded job does not.
PENDING_STATES = ("scheduled", "ready", "running")

Scope = tuple[str, str, str]  # (queue as enqueued, tenant, key)


def check_key(key: object) -> str:
    """A unique key as every store can keep it, or ConfigError naming the fix."""
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise ConfigError(f"unique_key must be a str, got {type(key).__name__}: {key!r:.80}")
    text = str(key)
    if not text:
        raise ConfigError("unique_key must not be empty")
    if len(text) > MAX_KEY_CHARS:
        raise ConfigError(
            f"unique_key is {len(text)} characters, over {MAX_KEY_CHARS}; pass a digest of it "
            "(e.g. hashlib.sha256(text.encode()).hexdigest())"
        )
    if "\x00" in text:
        raise ConfigError("unique_key contains a NUL character (\\x00); remove or encode it")
    try:
        text.encode()
    except UnicodeEncodeError:
        raise ConfigError("unique_key is not valid Unicode (a lone surrogate)") from None
    return text


def arguments_key(name: str, payload: str) -> str:
    """The key a job gets when none is named: its name and its arguments as passed (the JSON
    payload), so the same call enqueued twice is the same work."""
    digest = hashlib.sha256(f"{name}\0{payload}".encode()).hexdigest()
    return f"args:{digest}"


def is_held(expires_at: float, hold: bool, pending: bool, now: float) -> bool:
    """Whether a stored key holds at ``now``: within its window, and, unless it holds for
    the whole window (``hold``: a periodic job's tick), while its job is pending (scheduled,
    ready or running; a job that is gone, pruned or never stored, is not)."""
    return now < expires_at and (hold or pending)


@dataclass(frozen=True)
class Holder:
    """The job an enqueue's key is held by: stored before (``queue`` known), or an earlier
    job of the same batch (``index``; its queue is the one that job goes to)."""

    job_id: str
    queue: str | None = None
    index: int | None = None


def scope(job: NewJob) -> Scope | None:
    return None if job.unique is None else (job.queue, job.tenant, job.unique.key)


def holders(
    jobs: Sequence[NewJob], stored: Callable[[NewJob], tuple[str, str] | None]
) -> dict[int, Holder]:
    """Which jobs of a batch find their key held, in batch order, as one enqueue after
    another would: ``stored(job)`` is the (job id, queue) holding its key in the store, or
    None when the key is free (``is_held``); a key free in the store but taken by an earlier
    job of the batch is held by that job."""
    found: dict[int, Holder] = {}
    taken: dict[Scope, int] = {}
    for i, job in enumerate(jobs):
        key = scope(job)
        if key is None:
            continue
        if key in taken:
            first = taken[key]
            found[i] = Holder(jobs[first].id, index=first)
        elif (held := stored(job)) is not None:
            found[i] = Holder(held[0], queue=held[1])
        else:
            taken[key] = i
    return found


def answer(
    count: int, held: dict[int, Holder], queues: Sequence[str]
) -> tuple[list[str], dict[int, str]]:
    """The queue of each of ``count`` jobs and the ids of the existing jobs, from the queues
    of the jobs stored (``queues``, in order, the held ones left out)."""
    stored = iter(queues)
    chosen = ["" if i in held else next(stored) for i in range(count)]
    for i, holder in held.items():
        if holder.index is not None:
            chosen[i] = chosen[holder.index]
        else:
            assert holder.queue is not None
            chosen[i] = holder.queue
    return chosen, {i: holder.job_id for i, holder in held.items()}
