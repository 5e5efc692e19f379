"""The host this process runs on, as manifests, reports and calibrations name it."""

from __future__ import annotations

import platform


def cpu_model() -> str:
    """The host CPU's model name (Linux ``/proc/cpuinfo``; elsewhere what ``platform`` knows).

    Reports and manifests carry it because wall-clock figures and K = 50 accuracies differ between
    CPU families; ``platform.processor()`` is empty on Linux, which once let a run be credited to
    the wrong machine."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
