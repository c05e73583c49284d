"""Every error fairq raises. Each message names the problem and, where there is one, the fix."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fairq.job import JobInfo


class FairqError(Exception):
    """Base class of every fairq error."""


class ConfigError(FairqError, ValueError):
    """A setting is invalid: a URL, a weight, a cap, a queue order, a job declaration."""


class StoreUnavailable(FairqError):
    """The store cannot be reached or opened. Check the URL and that the server runs."""


class SchemaError(FairqError):
    """The store's schema does not match this fairq (too old, or made by a newer fairq)."""


class JobArgumentsError(FairqError, TypeError):
    """A job's arguments cannot be stored: they must be JSON-serialisable (no pickle, ever)."""


class JobHeadersError(FairqError, ValueError):
    """A job's headers cannot be stored: a flat JSON object of str to str, under the size cap."""


class PayloadTooLarge(FairqError, ValueError):
    """A job's encoded arguments exceed the store's payload limit (``App(max_payload_bytes=…)``)."""


class UnknownJob(FairqError, LookupError):
    """No job with that name is declared. Declarations are published when a worker starts."""


class DuplicateJob(FairqError, ValueError):
    """A job id is already stored (or repeated in one batch); nothing of the batch was stored."""


class InvalidTenant(FairqError, ValueError):
    """A tenant id is not usable: it must be a non-empty str (or int) of valid Unicode."""


class MissingTenant(InvalidTenant):
    """A job has no tenant. Pass one, or give the App a ``fallback_tenant``."""


class LeaseError(FairqError):
    """A lease cannot be used: nothing was changed."""


class LeaseNotFound(LeaseError, LookupError):
    """No job is held under that lease (never issued, already acked, or handed out again)."""

    @classmethod
    def of(cls, token: str) -> LeaseNotFound:
        return cls(
            f"no job is held under lease {token!r}: it was never issued, is already finished, "
            "or was handed back or expired"
        )


class LeaseExpired(LeaseError):
    """The lease's deadline passed: the job goes back to its queue and may already run elsewhere."""

    @classmethod
    def of(cls, token: str, deadline: float, now: float) -> LeaseExpired:
        return cls(
            f"lease {token!r} expired at {deadline:.3f} (now {now:.3f}); the job goes back to "
            "its queue, so its result is not recorded"
        )


class CursorError(FairqError, TypeError):
    """An iterative job yielded a cursor that cannot be stored: cursors must be JSON values
    (str, int, finite float, bool, None, lists and dicts with str keys). The attempt fails;
    the last good cursor stays stored."""


class JobCancelled(FairqError):
    """The running job was asked to stop (``App.cancel``): raised in the job's own code by
    ``fairq.current_job().raise_if_cancelled()``. Let it propagate: the job then ends
    ``cancelled`` (never retried)."""


class ResultError(FairqError, TypeError):
    """A job's return value cannot be kept: a job declared with ``result_ttl`` must return a JSON
    value (str, int, finite float, bool, None, lists and dicts with str keys). The attempt fails
    (retried as any failure); nothing else is affected."""


class ResultTooLarge(ResultError, PayloadTooLarge):
    """A job's return value is larger, as JSON, than the App's ``max_payload_bytes``: keep large
    data elsewhere and return a reference. The attempt fails, as for ``ResultError``."""


class NoResult(FairqError, LookupError):
    """There is no result to wait for: no job has that id (never enqueued in this store, or
    deleted after its retention), or it succeeded without one (declared without ``result_ttl``)."""


class JobFailed(FairqError):
    """The job will never give a result: it is dead (out of attempts) or cancelled. ``info`` is
    the job as the store keeps it; its ``last_error`` says why."""

    def __init__(self, message: str, info: JobInfo) -> None:
        super().__init__(message)
        self.info = info


class ResultTimeout(FairqError, TimeoutError):
    """``App.result`` waited its ``timeout`` and the job has not finished yet; it may still.
    Wait again, or look at it with ``fairq job ID``."""
