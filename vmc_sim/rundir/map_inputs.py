"""What a map of a run draws, read from the run directory and verified (:func:`map_inputs`).

- **The network**: the SUMO network the traffic moved on. The run's manifest records the one its
  trace was recorded on (``mobility``: SUMO's ``net_file``, or the one its ``config_file`` names);
  a replayed trace records its own run's. Where that file is gone, the scenario's mobility source
  names it (:meth:`vmc_sim.sources.base.SourceKind.network_file`: the embedded city's is built
  again, or found in the SUMO build cache), and a replay looks in the manifest of the run whose
  trace it replayed. A network is drawn only when it verifies: against the SHA-256 the run's
  manifest keeps of its inputs (``inputs``), or against the digest its cache entry keeps
  (``build.json``, :mod:`mobility.cache`); otherwise the map says why it is missing.
- **The buildings** the run's radio had (:func:`vmc_sim.scenario.inputs.building_files`), verified
  the same way.
- **The RSUs** (the manifest's ``rsus``) and, from the run's resolved ``channel``, how far the median
  uplink in each link state still holds the lowest MCS (:func:`vmc_sim.radio.reach.median_reach_m`).
- **The clients' tracks**: the positions of each vehicle that became a client (a record's ``added``)
  while in coverage, from the run's trace (its join and leave events and the members' state
  samples), verified as ``vmc export availability`` verifies it
  (:func:`vmc_sim.rundir.export.load_availability`); a track breaks where the vehicle left coverage.
- **What became of their contributions**, per method (:func:`client_outcomes`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mobility.cache import MANIFEST, file_sha256
from mobility.dwell import Visit
from mobility.polygons import Footprint, read_poly_file
from mobility.trace import read_trace

from ..radio.link_budget import ChannelConfig
from ..radio.link_state import LinkState
from ..radio.reach import link_states, median_reach_m
from ..scenario.config import ConfigError, load_model
from ..scenario.inputs import building_files
from ..scenario.mobility_section import source_fields
from ..scenario.schema import Scenario
from ..sources.registry import SOURCES
from .directory import RunDir, read_manifest
from .export import load_availability

OUTCOMES = ("arrived", "not arrived", "withdrawn", "not trained")
"""What became of a client's contributions under one method, in the order they take precedence:
``not arrived`` (a contribution it trained never reached the coordinator: the record's
``not_arrived``), ``withdrawn`` (it was a member of a model that was withdrawn: a ``suspend``
record's ``withdrawn`` among the ``members`` before it), ``arrived`` (what it trained arrived),
``not trained`` (a client the method never asked to train, e.g. outside F-SOSA's subset)."""

Point = tuple[float, float, float]
"""(simulated time, x, y) of a position."""


@dataclass
class MapInputs:
    """Everything a map of a run draws; ``notes`` say what it could not draw and why."""

    run: Path
    status: str | None
    scenario: str
    rsus: list[dict[str, Any]]
    tracks: dict[str, list[list[Point]]]
    """Per client its visits in coverage, each a list of positions in time order."""
    outcomes: dict[str, dict[str, str]]
    """Per method, per client, one of :data:`OUTCOMES`."""
    network: list[list[tuple[float, float]]] | None = None
    network_file: str | None = None
    buildings: list[Footprint] = field(default_factory=list)
    reach: dict[LinkState, float] = field(default_factory=dict)
    radio: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def methods(self) -> list[str]:
        """The run's methods, in the order their records first appear."""
        return list(self.outcomes)

    def span(self) -> tuple[float, float]:
        """The first and last simulated time of any track (0, 0 without tracks)."""
        times = [p[0] for visits in self.tracks.values() for visit in visits for p in visit]
        return (min(times), max(times)) if times else (0.0, 0.0)


def client_outcomes(
    records: Iterable[dict[str, Any]], contributions: Iterable[dict[str, Any]]
) -> dict[str, dict[str, str]]:
    """Per method, per client (every vehicle a record ``added``), what became of its contributions
    (:data:`OUTCOMES`): ``contributions`` are :func:`vmc_sim.rundir.export.load_availability`'s
    rows (``arrived`` / ``not_arrived`` per contribution), the records give the clients and the
    models withdrawn with their members."""
    clients: list[str] = []
    withdrawn: dict[str, set[str]] = {}
    members: dict[str, set[str]] = {}
    for r in records:
        method = r["method"]
        withdrawn.setdefault(method, set())
        clients += [str(c) for c in r.get("added") or []]
        if r.get("kind") == "suspend":
            withdrawn[method] |= {str(c) for c in r.get("withdrawn") or []} & members.get(method, set())
        if r.get("members"):
            members[method] = {str(c) for c in r["members"]}
    arrived: dict[str, set[str]] = {m: set() for m in withdrawn}
    lost: dict[str, set[str]] = {m: set() for m in withdrawn}
    for row in contributions:
        (arrived if row["outcome"] == "arrived" else lost).setdefault(row["method"], set()).add(str(row["client"]))
        clients.append(str(row["client"]))
    out: dict[str, dict[str, str]] = {}
    for method in withdrawn:
        out[method] = {}
        for c in dict.fromkeys(clients):
            if c in lost[method]:
                out[method][c] = "not arrived"
            elif c in withdrawn[method]:
                out[method][c] = "withdrawn"
            else:
                out[method][c] = "arrived" if c in arrived[method] else "not trained"
    return out


def client_tracks(
    trace_path: str | Path, visits: Iterable[Visit], clients: Iterable[str]
) -> dict[str, list[list[Point]]]:
    """Per client its visits in coverage (``visits``: :func:`mobility.dwell.coverage_visits` of the
    trace), each the positions of its events and state samples from its join to its leave."""
    wanted = set(clients)
    spans: dict[str, list[Visit]] = {}
    for v in visits:
        if v.vehicle in wanted:
            spans.setdefault(v.vehicle, []).append(v)
    trace = read_trace(trace_path, with_states=True)
    points = [(e.time, e.vehicle, e.x, e.y) for e in trace.events if e.vehicle in spans]
    points += [(t, m.vehicle, m.x, m.y) for t, ms in trace.states for m in ms if m.vehicle in spans]
    points.sort(key=lambda p: p[0])  # stable: at one instant, events before samples
    tracks: dict[str, list[list[Point]]] = {c: [[] for _ in spans[c]] for c in sorted(spans)}
    for t, vehicle, x, y in points:
        for i, v in enumerate(spans[vehicle]):
            if v.join <= t and (v.leave is None or t <= v.leave):
                visit = tracks[vehicle][i]
                if not visit or visit[-1] != (t, x, y):
                    visit.append((t, x, y))
                break
    return {c: [visit for visit in visits if visit] for c, visits in tracks.items()}


def _unverified(path: str, inputs: dict[str, str]) -> str | None:
    """Why ``path`` cannot be drawn as the run's (None: it verifies): missing, changed since the run
    (the manifest's input digest), changed since its cache entry was built, or no digest recorded."""
    p = Path(path)
    if not p.is_file():
        return "missing"
    if path in inputs:
        found = file_sha256(p)
        return (
            None
            if found == inputs[path]
            else f"changed since the run (sha256 {found[:12]}, recorded {inputs[path][:12]})"
        )
    entry = p.parent / MANIFEST
    if entry.is_file():
        try:
            recorded = (json.loads(entry.read_text()).get("outputs") or {}).get(p.name)
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
            return f"its cache entry {entry} is unreadable"
        if recorded is not None:
            found = file_sha256(p)
            return (
                None
                if found == recorded
                else f"changed since it was built (sha256 {found[:12]}, {entry} records {recorded[:12]})"
            )
    return "no digest of it is recorded, so it cannot be verified"


def _recorded_network(meta: dict[str, Any]) -> str | None:
    """The network a trace header (a manifest's ``mobility``) names: SUMO's or the FCD's."""
    from mobility.sumo_files import sumocfg_inputs

    found = meta.get("sumo")
    sumo: dict[str, Any] = found if isinstance(found, dict) else {}
    net = sumo.get("net_file") or meta.get("net_file")
    if not net and sumo.get("config_file") and Path(sumo["config_file"]).is_file():
        net = sumocfg_inputs(sumo["config_file"])["net_file"]
    return str(net) if net else None


def scenario_of(manifest: dict[str, Any], where: Path) -> Scenario:
    """The scenario a run's manifest records (refused naming the manifest)."""
    try:
        return load_model(Scenario, None, manifest["config"])
    except ConfigError as e:
        raise ConfigError(str(e).replace("<embedded default>", f"{where}: config")) from None


def network_file(manifest: dict[str, Any], where: Path, notes: list[str], depth: int = 0) -> str | None:
    """The verified network of the run whose manifest is ``manifest`` (module docstring), or None
    with the reasons in ``notes``."""
    inputs = manifest.get("inputs") or {}
    recorded = _recorded_network(manifest.get("mobility") or {})
    problems: list[str] = []
    if recorded:
        problem = _unverified(recorded, inputs)
        if problem is None:
            return recorded
        problems.append(f"{recorded}: {problem}")
    m = scenario_of(manifest, where).mobility
    kind = SOURCES[m.source]
    if kind.replays_trace:
        beside = Path(m.trace).parent / "manifest.json" if m.trace else None
        if beside is not None and beside.is_file() and depth < 3:
            found = network_file(read_manifest(beside), beside, problems, depth + 1)
            if found is not None:
                return found
    else:
        try:
            named = kind.network_file(source_fields(m))
        except Exception as e:  # a generated network that cannot be built here (no SUMO): say so
            problems.append(f"the {m.source} source's network could not be built here: {e}")
            named = None
        if named and named != recorded:
            problem = _unverified(named, inputs)
            if problem is None:
                return named
            problems.append(f"{named}: {problem}")
    notes.append("network not drawn: " + ("; ".join(problems) or "the run names none"))
    return None


def read_network(path: str) -> list[list[tuple[float, float]]]:
    """The shape of every edge of a SUMO network (sumolib, the ``[sumo]`` extra)."""
    import sumolib

    net = sumolib.net.readNet(path, withInternal=False)
    return [[(float(x), float(y)) for x, y, *_ in edge.getShape()] for edge in net.getEdges()]


def _radio(manifest: dict[str, Any], inputs: MapInputs) -> None:
    """The link states' median reach from the run's resolved channel, and the radio's description."""
    recorded = manifest.get("channel")
    if not isinstance(recorded, dict):
        inputs.notes.append("reach not drawn: the manifest records no channel")
        return
    known = {f.name for f in dataclasses.fields(ChannelConfig)}
    try:
        cfg = ChannelConfig(**{k: v for k, v in recorded.items() if k in known})
    except (TypeError, ValueError) as e:
        inputs.notes.append(f"reach not drawn: the manifest's channel does not validate ({e})")
        return
    inputs.reach = {s: median_reach_m(s, cfg) for s in link_states(cfg)}
    inputs.radio = f"{cfg.path_loss_model}, {cfg.link_state_model} link states, {cfg.rate_model}"


def map_inputs(path: str | Path) -> MapInputs:
    """Read and verify what a map of the run at ``path`` draws (module docstring). Raises
    FileNotFoundError, CorruptFileError or TraceError naming the file for a run, records or trace
    that is missing or does not verify; a network or building file that does not verify is left
    out with a note."""
    run = RunDir(path, create=False)
    manifest = read_manifest(run.path / "manifest.json")
    availability = load_availability(run.path)
    records = list(run.records())
    scenario = scenario_of(manifest, run.path / "manifest.json")
    order = [*scenario.federated.methods, *scenario.federated.strategies]
    found = client_outcomes(records, availability.contributions or [])
    outcomes = {m: found[m] for m in sorted(found, key=lambda m: order.index(m) if m in order else len(order))}
    clients = {c for per in outcomes.values() for c in per}
    inputs = MapInputs(
        run=run.path,
        status=manifest.get("status"),
        scenario=str(manifest["config"].get("name", run.path.name)),
        rsus=[r for r in manifest.get("rsus") or [] if isinstance(r, dict)],
        tracks=client_tracks(availability.meta["trace"]["path"], availability.visits, clients),
        outcomes=outcomes,
    )
    _radio(manifest, inputs)
    inputs.network_file = network_file(manifest, run.path / "manifest.json", inputs.notes)
    if inputs.network_file is not None:
        try:
            inputs.network = read_network(inputs.network_file)
        except ImportError:
            inputs.notes.append("network not drawn: reading it needs sumolib (the [sumo] extra)")
    digests = manifest.get("inputs") or {}
    for f in building_files(scenario):
        problem = _unverified(f, digests)
        if problem is None:
            inputs.buildings += read_poly_file(f)
        else:
            inputs.notes.append(f"buildings not drawn: {f}: {problem}")
    return inputs


def bounds(inputs: MapInputs) -> tuple[float, float, float, float]:
    """(xmin, ymin, xmax, ymax) of what happened: the RSUs' coverage, the tracks and the reach circles
    up to three coverage radii (a farther one shows as an arc, its distance in the legend); the
    network's bounds when there is none of these."""
    xs: list[float] = []
    ys: list[float] = []
    for visits in inputs.tracks.values():
        for visit in visits:
            xs += [p[1] for p in visit]
            ys += [p[2] for p in visit]
    for r in inputs.rsus:
        radius = float(r["radius"])
        reach = max([radius, *(d for d in inputs.reach.values() if d <= 3 * radius)])
        xs += [float(r["x"]) - reach, float(r["x"]) + reach]
        ys += [float(r["y"]) - reach, float(r["y"]) + reach]
    if not xs and inputs.network:
        xs = [x for edge in inputs.network for x, _ in edge]
        ys = [y for edge in inputs.network for _, y in edge]
    if not xs:
        return (0.0, 0.0, 1.0, 1.0)
    return min(xs), min(ys), max(xs), max(ys)
