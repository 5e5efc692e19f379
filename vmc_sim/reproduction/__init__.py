"""What the reproduction scripts under ``tools/`` share: the one-shot runs' common pieces
(:mod:`.common`), the reports' machine lines and tables (:mod:`.report`), and the editing-sequence
experiments of Fig. 3 and Table VI (:mod:`.sequences`).

Imports fl_core, mobility, and of vmc_sim compute, scenario, rundir, the run itself (``cosim``) and
sweep's statistics.
"""
