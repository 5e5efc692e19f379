"""The run directory: where a command may write (the one rule), the one-writer lock, the directory
itself (manifest, records, tensors, fingerprints), the record writer and the records' shared
vocabulary, every model a method released, and the readers that summarise, plot, audit, certify
and export a run.

Imports fl_core, mobility, and of vmc_sim only scenario and compute.
"""
