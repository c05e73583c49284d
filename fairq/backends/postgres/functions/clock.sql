-- The time of an event is the time the store performs it (docs/internals/scheduler.md): the
-- later of the caller's now and the server's clock, read by the caller once the event's locks
-- are held. So a call the reconnect loop sends again after an outage, or one that waited for
-- a queue's lock, never hands out a lease that started in the past nor charges a tenant for
-- the wait. A session whose fairq.clock setting is 'caller' (a store URL with ?clock=caller,
-- db.py) keeps the caller's now exactly: tests on a virtual clock.
CREATE FUNCTION {schema}.event_time(p_now double precision)
RETURNS double precision LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN current_setting('fairq.clock', true) = 'caller' THEN p_now
        ELSE GREATEST(p_now, extract(epoch FROM clock_timestamp())::double precision) END
$$;
