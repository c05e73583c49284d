"""The options fairq's Dramatiq actors and messages carry (shared by tasks.py, router.py,
slots.py and the FairDramatiq that declares them)."""

#: Actor options FairMiddleware adds (``@dramatiq.actor(actor_class=FairActor, fair_tenant=…)``);
#: ``fair_tenant`` may also be given per message: ``send_with_options(…, fair_tenant="acme")``.
TENANT_OPTION = "fair_tenant"
LEASE_OPTION = "fair_lease"
COST_OPTION = "fair_cost"
THROTTLE_OPTION = "fair_throttle"
#: Actor option: guard a RoutedActor's runs with tenant slots.
SLOTS_OPTION = "fair_slots"
#: Message option: the tenant a RoutedActor's send found (the slot guard reads it).
MESSAGE_TENANT = "fair_tenant"
#: Seconds a fair job's lease lasts without a heartbeat: how long a killed Dramatiq worker's
#: job waits before the relay releases it again.
DEFAULT_LEASE = 60.0
