-- fairq SQLite schema, version 5: tenant slots (fairq/policy/slots.py), the leased places a
-- guard in a peer broker's worker takes before it runs a job. One row per slot held, found by
-- its nonce (the middle of its token); slots_place counts a (queue, tenant)'s slots and finds
-- its expired ones, slots_deadline lets maintenance delete every expired slot.
CREATE TABLE slots (
    nonce    TEXT PRIMARY KEY,
    queue    TEXT NOT NULL,
    tenant   TEXT NOT NULL,
    holder   TEXT NOT NULL,
    lease    REAL NOT NULL,
    deadline REAL NOT NULL
) WITHOUT ROWID;

CREATE INDEX slots_place ON slots (queue, tenant, deadline);
CREATE INDEX slots_deadline ON slots (deadline);
