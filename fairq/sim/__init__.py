"""The strategy simulator: every fairness approach on the same workloads, on a virtual clock.

``fairq.sim.engine`` runs the events; ``fairq.sim.strategies`` holds one small model per
approach (fairq's own is the reference model itself, driven through the Backend contract, never
a second implementation); ``fairq.sim.workloads`` makes the named, seeded scenarios;
``fairq.sim.metrics`` turns a run into the figures. ``fairq simulate`` is the command line.
"""
