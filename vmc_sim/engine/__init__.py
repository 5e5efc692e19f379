"""The discrete-event engine: the co-simulation's simpy kernel, one world per method (request-driven
editors and multi-round strategies), what a world sees of the run (its context), the vehicles as
the engine sees them, the requests, the client pool and the time models that charge jobs and solves.

Imports fl_core, mobility, and of vmc_sim radio, compute, scenario and rundir.
"""
