"""The worker side of relayed Celery tasks: ``RelayedCall``, a base of ``FairTask``, claims a
relayed message's lease before the task body runs (an older copy of a message the relay sent
again is skipped), stores the outcome in fairq after, and leaves retries to fairq."""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, ClassVar

import celery
from celery.exceptions import Ignore, Retry

from fairq.job import JobState
from fairq.relay import TICKET_KEY

if TYPE_CHECKING:
    from fairq.integrations.celery import FairCelery


class RelayedCall(celery.Task):  # type: ignore[misc]  # Celery ships no type hints
    """Runs a relayed message under its fairq lease (``fair``: the FairCelery)."""

    fair: ClassVar[FairCelery]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run a relayed message under its fairq lease: claim it (an older copy of a message
        the relay sent again is skipped), run, store the outcome."""
        ticket = self._ticket()
        if ticket is None:  # called directly, eagerly, or sent without the relay
            return super().__call__(*args, **kwargs)
        run = self.fair.runs.begin(ticket)
        if run is None:
            raise Ignore()  # said in the log by begin
        try:
            result = super().__call__(*args, **kwargs)
        except Ignore:
            run.succeeded()  # the task chose to end here
            raise
        except BaseException as exc:
            cause = exc.exc if isinstance(exc, Retry) and exc.exc is not None else exc
            info = run.failed(cause)
            if info is not None and info.state not in (JobState.DEAD, JobState.CANCELLED):
                when = datetime.fromtimestamp(info.run_at, tz=timezone.utc)
                raise Retry(
                    f"fairq retries it (attempt {info.attempts} of {info.max_attempts} failed)",
                    exc=cause,
                    when=when,
                ) from cause
            raise
        run.succeeded()
        return result

    def retry(
        self,
        args: Any = None,
        kwargs: Any = None,
        exc: BaseException | None = None,
        throw: bool = True,
        eta: Any = None,
        countdown: Any = None,
        max_retries: int | None = None,
        **options: Any,
    ) -> Any:
        """fairq retries fair tasks: in a relayed run (and one sent without the relay) this
        ends the attempt with ``exc`` (or the exception being handled) instead of sending the
        task again; fairq's back-off and ``fair_max_attempts`` apply. Eager runs retry as
        Celery does."""
        if self.request.is_eager or self.request.called_directly:
            return super().retry(args, kwargs, exc, throw, eta, countdown, max_retries, **options)
        cause = exc if exc is not None else sys.exc_info()[1]
        raise cause if cause is not None else Retry("the task asked to be retried")

    def _ticket(self) -> object | None:
        request = self.request
        if request.called_directly:
            return None
        ticket = getattr(request, TICKET_KEY, None)
        if ticket is None and isinstance(request.headers, dict):
            ticket = request.headers.get(TICKET_KEY)
        return ticket
