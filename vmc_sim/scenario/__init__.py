"""The scenario: its schema (typed sections validated from YAML, every key documented beside its
definition), the mobility section and each source's input files (checked, digested), which data
shard a vehicle holds, and the documentation generated from the schema.

Imports fl_core, mobility, and of vmc_sim only radio and compute (their configurations).
"""
