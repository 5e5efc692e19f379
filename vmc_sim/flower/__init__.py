"""F-SOSA on Flower's Message API: a vmc-sim schedule replayed against a Flower grid, on the
co-simulation's radio.

One Flower node per vehicle of the schedule (``vmc export availability RUN --format flower``, or
the co-simulation ``vmc flower SCENARIO`` runs first: :mod:`vmc_sim.flower.radio_run`). The server
keeps fl_core's F-SOSA editor, whose client pool asks the nodes for their contributions by
message: a node trains once from the W0 it receives on its vehicle's shard (the shard ``vmc run``
gives that vehicle) and replies with its weights and Fisher; a member that the subset coupling
swaps out uploads the contribution it holds again; a departing vehicle sends nothing and is removed
exactly at the server. A schedule from a run directory carries the run's link outcomes: the replay
makes the run's edits and loses the replies the run lost (:mod:`vmc_sim.flower.radio`), so Flower
releases ``vmc run``'s models. The same replay drives the editor in one process
(:func:`vmc_sim.flower.replay.direct_run`), so both release the same models. The packaged app
that ``flwr run`` runs is :mod:`vmc_sim.flower.app_config` (``examples/flower_app``), run with a
SuperLink of its own by :mod:`vmc_sim.flower.flwr_run`.

:mod:`~vmc_sim.flower.schedule`, :mod:`~vmc_sim.flower.replay`, :mod:`~vmc_sim.flower.radio`,
:mod:`~vmc_sim.flower.radio_run` and :mod:`~vmc_sim.flower.flwr_run` need no Flower;
:mod:`~vmc_sim.flower.apps`, :mod:`~vmc_sim.flower.strategies`, :mod:`~vmc_sim.flower.app_config`
and :mod:`~vmc_sim.flower.messages` need the ``[flower]`` extra (``flwr[simulation]==1.42.*``).

Imports fl_core, mobility, and of vmc_sim scenario, rundir, engine and cosim.
"""
