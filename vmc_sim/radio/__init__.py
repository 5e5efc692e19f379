"""The radio: the V2I link budget (path loss, noise, SNR, rate), the rate tables, each RSU's channel
with processor sharing and outage, and the transfers that cross it (handover, store and forward).

Owns everything between a vehicle's position and the seconds and bytes of a transfer; its
path-loss and rate models are found by name (:mod:`.path_loss`, :mod:`.rate_models`). Imports only
fl_core's registry: positions and coverage come in as callables and protocols.
"""
