"""Solves that stopped before their tolerance: found in a run's records, reported in its summary
and manifest (the projection also warns as it happens, see ``fl_core.projection``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from fl_core.solve_stops import STOPPED_SHORT


def unconverged_solves(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per method with at least one unconverged solve: how many solves, how many stopped before
    their tolerance, the worst relative residual they reached, their stop reasons and requests."""
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        s = r.get("solve")
        if not isinstance(s, dict):
            continue
        method = cast(str, r.get("method"))  # every record names its method
        e = out.setdefault(
            method, {"solves": 0, "unconverged": 0, "worst_residual": 0.0, "stop_reasons": {}, "requests": []}
        )
        e["solves"] += 1
        if s.get("converged", True):
            continue
        stopped = [c for c in s.get("candidates") or [] if c.get("stop_reason") in STOPPED_SHORT]
        if s.get("stop_reason") in STOPPED_SHORT or not stopped:
            stopped.append(s)
        e["unconverged"] += 1
        e["worst_residual"] = max([e["worst_residual"], *(float(c.get("residual") or 0.0) for c in stopped)])
        for c in stopped:
            reason = c.get("stop_reason", "unknown")
            e["stop_reasons"][reason] = e["stop_reasons"].get(reason, 0) + 1
        e["requests"].append(r.get("index"))
    return {m: e for m, e in out.items() if e["unconverged"]}


def warning_lines(found: dict[str, dict[str, Any]], tol: float) -> list[str]:
    """One line per method: ``warning: fsosa: 3 of 40 solves stopped before tolerance 1e-06 ...``."""
    lines = []
    for m, e in found.items():
        req = ", ".join(str(i) for i in e["requests"][:8]) + (", ..." if len(e["requests"]) > 8 else "")
        reasons = ", ".join(f"{k} x{v}" for k, v in sorted(e["stop_reasons"].items()))
        lines.append(
            f"warning: {m}: {e['unconverged']} of {e['solves']} solves stopped before their tolerance "
            f"{tol:.0e} (worst relative residual reached {e['worst_residual']:.2e}; {reasons}; "
            f"requests {req}); raise federated.projection.max_iter or see the records' 'solve'"
        )
    return lines
