"""F-SOSA on Flower's Message API: a vmc-sim availability schedule replayed against a Flower grid.

One Flower node per vehicle of the schedule (``vmc export availability RUN --format flower``). The
server replays the schedule's joins and leaves with fl_core's F-SOSA editor, whose client pool asks
the nodes for their contributions by message: a node trains once from the W0 it receives on its
vehicle's shard (the shard ``vmc run`` gives that vehicle) and replies with its weights and Fisher;
a member that the subset coupling swaps out uploads the contribution it holds again; a departing
vehicle sends nothing and is removed exactly at the server. The same replay drives the editor in
one process (:func:`vmc_sim.flower.replay.direct_run`), so both release the same models.

:mod:`vmc_sim.flower.replay` needs no Flower; :mod:`vmc_sim.flower.apps` and
:mod:`vmc_sim.flower.messages` need the ``[flower]`` extra (``flwr[simulation]==1.42.*``).

Imports fl_core, mobility, and of vmc_sim scenario, rundir and engine.
"""
