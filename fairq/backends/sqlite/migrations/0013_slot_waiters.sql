-- fairq SQLite schema, version 13: the line of jobs parked for a tenant slot
-- (fairq/policy/slots.py), so a release wakes the oldest at once. One row per parked job, by
-- its place; woken = 1 once a release handed it out (it stays until a copy takes a slot);
-- touched: its last change, for maintenance to drop lines nobody comes back to (PARK_TTL).
CREATE TABLE slot_waiters (
    place   TEXT PRIMARY KEY,
    queue   TEXT NOT NULL,
    tenant  TEXT NOT NULL,
    since   REAL NOT NULL,
    park    TEXT NOT NULL,
    woken   INTEGER NOT NULL DEFAULT 0,
    touched REAL NOT NULL
) WITHOUT ROWID;

CREATE INDEX slot_waiters_line ON slot_waiters (queue, tenant, woken, since);
CREATE INDEX slot_waiters_touched ON slot_waiters (touched);
