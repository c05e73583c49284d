"""``fairq demo``: one greedy tenant floods a queue; do the small tenants still get served?

The same scenario runs twice on real worker processes: first in FIFO order (every job under one
shared tenant, which is what Celery and RQ do), then with fairq's per-tenant fair scheduling.
The modules, each with one job:

* ``jobs``     the demo's App and job functions, importable by worker processes;
* ``scenario`` the sizes and the plan of who enqueues what;
* ``workers``  starting and stopping ``fairq worker`` processes;
* ``runner``   running one mode: enqueue, start workers, watch progress, collect job records;
* ``figures``  waits, throughput and Jain's fairness index from the records (pure);
* ``report``   the side-by-side table and the JSON document.
"""
