"""Why an iterative solve stops, in the words its records use: the reasons that mean it stopped
before its tolerance (imported by the readers of a run's records, which need no torch)."""

from __future__ import annotations

STOPPED_SHORT = ("max_iter", "stalled")
"""A solve's ``stop_reason`` values that mean it stopped before reaching its tolerance."""
