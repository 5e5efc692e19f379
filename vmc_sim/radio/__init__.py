"""The radio: the V2I link budget (path loss, noise, SNR, rate), the rate tables, each RSU's channel
with processor sharing and outage, the transfers that cross it (handover, store and forward), and
how far the median link in each state still carries data (:mod:`.reach`).

Owns everything between a vehicle's position and the seconds and bytes of a transfer; its
path-loss and rate models are found by name (:mod:`.path_loss`, :mod:`.rate_models`). Imports only
fl_core's registry: positions and coverage come in as callables and protocols.
"""
