"""Mobility sources by name: what traffic a scenario runs on (the embedded city, your SUMO files,
LuST, a recorded trace, SUMO's floating car data), each a kind in one file that says the fields it
reads, what it needs, how its inputs are checked, which files they are, and how it opens; the
kinds that run SUMO share one template.

Imports fl_core (its registry) and mobility; nothing else of vmc_sim.
"""
