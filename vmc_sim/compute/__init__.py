"""The compute model: the simulated hardware's profiles, the shared device queue and the verb that
runs a job on it, the host's description, and the calibration of host costs.

Imports fl_core only (the calibration measures its training and solves).
"""
