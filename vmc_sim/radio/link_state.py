"""The state of one link, as 3GPP TR 37.885 names them: LOS (nothing on the line between the
antennas), NLOSv (blocked by a vehicle) and NLOS (blocked by a building)."""

from __future__ import annotations

from enum import Enum


class LinkState(str, Enum):
    """A link's propagation state; the path loss, shadowing and blockage loss depend on it."""

    LOS = "los"
    NLOSV = "nlosv"
    NLOS = "nlos"
