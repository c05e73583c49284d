"""The model's unique keys (fairq/policy/unique.py): key -> the job that took it, its queue,
the end of its window, and whether it holds for the whole window."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fairq.job import JobState, NewJob
from fairq.policy.unique import PENDING_STATES, Scope, is_held, scope


@dataclass(frozen=True)
class Claim:
    job_id: str
    queue: str  # where the job went
    expires_at: float
    hold: bool


class UniqueTable:
    def __init__(self) -> None:
        self._claims: dict[Scope, Claim] = {}

    def holder(
        self, job: NewJob, now: float, state_of: Callable[[str], JobState | None]
    ) -> tuple[str, str] | None:
        """(job id, queue) of the job holding ``job``'s key at ``now``, or None: it is free."""
        key = scope(job)
        claim = None if key is None else self._claims.get(key)
        if claim is None:
            return None
        state = state_of(claim.job_id)
        pending = state is not None and state.value in PENDING_STATES
        if is_held(claim.expires_at, claim.hold, pending, now):
            return claim.job_id, claim.queue
        return None

    def take(self, job: NewJob, queue: str, now: float) -> None:
        key = scope(job)
        if key is not None and job.unique is not None:
            self._claims[key] = Claim(job.id, queue, now + job.unique.window, job.unique.hold)

    def prune(self, now: float) -> None:
        """Forget the keys whose window ended."""
        for key in [k for k, claim in self._claims.items() if claim.expires_at <= now]:
            del self._claims[key]
