"""The run directory: where a command may write (the one rule), the one-writer lock, the directory
itself (manifest, records, tensors, fingerprints), the record writer and the records' shared
vocabulary, every model a method released, and the readers that summarise, plot, map, audit,
certify and export a run, or read it as pandas DataFrames.

Imports fl_core, mobility, and of vmc_sim radio (the map's reach), sources (a run's network),
scenario and compute.
"""
