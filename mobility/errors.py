"""Exceptions of the mobility layer.

Kept in one small module so that every other module (and callers in ``vmc_sim``) can catch
them without importing SUMO.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mobility.events import MobilityEvent


class MobilityError(Exception):
    """Base class of every error raised by the mobility layer."""


class SumoError(MobilityError):
    """SUMO could not be found, could not start, or died during a run.

    ``events`` holds the join/leave events produced in the failing call before SUMO died, so
    that nothing already observed is lost (a recording source has written them to its trace
    before re-raising).
    """

    def __init__(self, message: str, events: list[MobilityEvent] | None = None) -> None:
        super().__init__(message)
        self.events: list[MobilityEvent] = list(events or [])


class TraceError(MobilityError, ValueError):
    """A trace file is malformed, truncated or of an unknown format; the message names the line."""


class FcdError(MobilityError, ValueError):
    """An FCD file is missing, empty or malformed; the message names the file and what is wrong."""


class BuildingsError(MobilityError, ValueError):
    """A polygon or network file cannot give building footprints (not a SUMO polygon file, a
    malformed shape, geographic coordinates); the message names the file and the polygon."""
