"""Throttling by re-routing for plain Celery tasks (no relay): a ``task_routes`` router that
counts each enqueue in fairq and sends a greedy tenant's new jobs to a slower queue.

::

    @celery_app.task(fair_tenant="account_id", fair_throttle=[Throttle(100, 3600, "slow")])
    def sync(account_id): ...

    celery_app.conf.task_routes = (fair.router,)

fairq's semantics (``Backend.route``, the window native enqueues of the same name and tenant
use): the current enqueue is counted, a rule matches when the count is strictly greater than its
threshold, the last matching rule wins. A call with an explicit ``queue`` is neither counted nor
re-routed, and neither is a Celery retry (Celery sends it back to the queue it came from).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fairq.contract import RouteParams
from fairq.errors import ConfigError, MissingTenant
from fairq.integrations.celery.calls import home_queue, tenant_of_call
from fairq.policy.bounds import check_tenant
from fairq.policy.throttle import Throttle

if TYPE_CHECKING:
    from fairq.integrations.celery import FairCelery

log = logging.getLogger("fairq.integrations.celery")


class FairRouter:
    """``celery_app.conf.task_routes = (fair.router,)``: routes the tasks that declare
    ``fair_throttle`` rules (with ``fair_tenant``, and ``fair_queue`` or ``queue`` for their
    home queue); every other task is left to the next router. Relayed fair tasks
    (``base=fair.Task``) are throttled when fairq stores them instead."""

    def __init__(self, fair: FairCelery) -> None:
        self.fair = fair
        self._outage = False

    def __call__(
        self,
        name: str,
        args: Sequence[Any] | None,
        kwargs: Mapping[str, Any] | None,
        options: Mapping[str, Any],
        task: Any = None,
        **extra: Any,
    ) -> dict[str, str] | None:
        rules = rules_of(task)
        if not rules or isinstance(task, self.fair.Task):
            return None
        if options.get("queue"):
            return None  # an explicit queue, or a retry sent back where it came from
        found = tenant_of_call(task, tuple(args or ()), dict(kwargs or {}))
        if found is None or found == "":
            raise MissingTenant(
                f"task {name!r} has throttle rules but this call has no tenant: declare the "
                "argument that holds it (fair_tenant='account_id'), or pass queue=… to skip "
                "throttling"
            )
        home = home_queue(task, self.fair.celery)
        params = RouteParams(
            name=name,
            tenant=check_tenant(found),
            queue=home,
            rules=rules,
            now=self.fair.app.clock(),
        )
        try:
            chosen = self.fair.runs.backend().route(params).queue
        except Exception as exc:  # the store is down: the job goes home rather than nowhere
            if not self._outage:
                log.error(
                    "throttling skipped: the fairq store failed (%s); jobs go to their home "
                    "queue until it is back (logged once per outage)",
                    exc,
                )
            self._outage = True
            return {"queue": home}
        if self._outage:
            log.warning("throttling resumed: the fairq store answers again")
            self._outage = False
        return {"queue": chosen}


def rules_of(task: Any) -> tuple[Throttle, ...]:
    """A task's ``fair_throttle`` rules, checked."""
    rules = getattr(task, "fair_throttle", None) or ()
    if isinstance(rules, (str, bytes, Throttle)) or not isinstance(rules, Sequence):
        raise ConfigError(f"fair_throttle must be a list of fairq.Throttle, got {rules!r}")
    for rule in rules:
        if not isinstance(rule, Throttle):
            raise ConfigError(f"fair_throttle must hold fairq.Throttle rules, got {rule!r}")
    return tuple(rules)
