-- fairq PostgreSQL schema, version 12: the line of jobs parked for a tenant slot
-- (fairq/policy/slots.py), so a release wakes the oldest at once. One row per parked job, by
-- its place; a (queue, tenant) is found through its tenant_key as in slots; woken once a
-- release handed it out (it stays until a copy takes a slot); touched: its last change, for
-- maintenance to drop lines nobody comes back to (PARK_TTL).
CREATE TABLE {schema}.slot_waiters (
    place      text PRIMARY KEY,
    queue      text COLLATE "C" NOT NULL,
    tenant     text COLLATE "C" NOT NULL,
    tenant_key bytea NOT NULL,
    since      double precision NOT NULL,
    park       text NOT NULL,
    woken      boolean NOT NULL DEFAULT false,
    touched    double precision NOT NULL
);

CREATE INDEX slot_waiters_line ON {schema}.slot_waiters (queue, tenant_key, woken, since);
CREATE INDEX slot_waiters_touched ON {schema}.slot_waiters (touched);
