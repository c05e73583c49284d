-- fairq PostgreSQL schema, version 4: tenant slots (fairq/policy/slots.py), the leased places
-- a guard in a peer broker's worker takes before it runs a job. One row per slot held, found
-- by its nonce (the middle of its token); slots_place counts a (queue, tenant)'s slots and
-- finds its expired ones (tenant_key: sha256 of the tenant, as in tenants), slots_deadline
-- lets maintenance delete every expired slot.
CREATE TABLE {schema}.slots (
    nonce      text PRIMARY KEY,
    queue      text COLLATE "C" NOT NULL,
    tenant     text COLLATE "C" NOT NULL,
    tenant_key bytea NOT NULL,
    holder     text NOT NULL,
    lease      double precision NOT NULL,
    deadline   double precision NOT NULL
);

CREATE INDEX slots_place ON {schema}.slots (queue, tenant_key, deadline);
CREATE INDEX slots_deadline ON {schema}.slots (deadline);
