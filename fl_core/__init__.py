"""Federated learning core of vmc-sim: data, models, local training, Fisher
representations, sufficient statistics and projection, the F-SOSA editing family and
its baselines. Imports neither ``mobility`` nor ``vmc_sim``."""

__version__ = "0.1.0"
