"""The scenario's documentation, generated from its schema so it cannot drift: the reference of
every key (``scenarios/REFERENCE.md``) and the table of local-training defaults in
``docs/federated.md``."""

from __future__ import annotations

from dataclasses import fields as dc_fields
from typing import TYPE_CHECKING, Any, cast

from mobility.city import CityConfig
from mobility.coverage import CoverageConfig
from mobility.rsu import RsuConfig

from ..compute.hardware import profile_table
from ..radio.link_budget import ChannelConfig
from .config import FederatedSection, ProjectionSection, RoundsSection, TrainSection
from .mobility_section import MobilitySection, RegionSection, SumoSection
from .schema import CalibrationCosts, ComputeSection, CoordinatorSection, CustomProfile, Scenario

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

SECTIONS: list[tuple[str, type]] = [
    ("", Scenario),
    ("mobility", MobilitySection),
    ("mobility.sumo", SumoSection),
    ("mobility.city", CityConfig),
    ("mobility.rsus", RsuConfig),
    ("mobility.coverage", CoverageConfig),
    ("mobility.region", RegionSection),
    ("federated", FederatedSection),
    ("federated.train", TrainSection),
    ("federated.projection", ProjectionSection),
    ("federated.rounds", RoundsSection),
    ("coordinator", CoordinatorSection),
    ("channel", ChannelConfig),
    ("compute", ComputeSection),
    ("compute.calibration", CalibrationCosts),
    ("compute.profile", CustomProfile),
]
"""Every section of a scenario by its key path: a pydantic model, or the dataclass of a lower
layer that a mapping section is built into (the reference and the schema's tests walk it)."""


def scenario_reference() -> str:
    """``scenarios/REFERENCE.md``: every section and key of a scenario, its default (the
    documented defaults resolved) and its meaning, generated from the schema."""
    import json
    from dataclasses import MISSING

    from pydantic import BaseModel

    defaults = Scenario().model_dump(mode="json")

    def at(path: str) -> Any:
        node: Any = defaults
        for part in filter(None, path.split(".")):
            node = node.get(part) if isinstance(node, dict) else None
        return node

    def show(v: Any) -> str:
        text = v if isinstance(v, str) else json.dumps(v)
        return f"`{text}`".replace("|", "\\|")

    lines = [
        "# Scenario reference",
        "",
        "Generated from the schema by `vmc_sim.scenario.docs.scenario_reference()` (a test keeps this file in",
        "step). A scenario file is read as the documented defaults below with the file's keys laid over",
        "them, mapping by mapping: `federated: {rho: 0.3}` changes rho and keeps every other default;",
        "lists are replaced. `vmc run SCENARIO --print-config` prints the fully resolved scenario.",
        "An unknown key is refused with the keys its section takes. Relative file paths are read",
        "relative to the scenario file. Examples: `city.yaml` (the default written out),",
        "`own_network.yaml` (your own SUMO network), `examples/fcd/fcd_grid.yaml` (recorded SUMO FCD).",
    ]
    for path, cls in SECTIONS:
        title = path or "top level"
        lines += ["", f"## {title}", "", "| key | default | meaning |", "|---|---|---|"]
        base = at(path) if path else defaults
        if isinstance(cls, type) and issubclass(cls, BaseModel):
            for name, f in cls.model_fields.items():
                sub = f.annotation
                nested = isinstance(sub, type) and issubclass(sub, BaseModel)
                if nested or (path == "" and name in ("mobility", "federated", "coordinator", "channel", "compute")):
                    default, meaning = "(section)", f"see `{(path + '.' if path else '') + name}` below"
                elif isinstance(base, dict) and name in base:
                    default, meaning = show(base[name]), f.description or ""
                elif f.is_required():
                    default, meaning = "(required)", f.description or ""
                else:
                    default, meaning = show(f.get_default(call_default_factory=True)), f.description or ""
                if name in ("city", "rsus", "coverage", "lust") and path == "mobility":
                    default = "(section)" if name != "lust" else show(base.get(name, {}))
                    meaning = (
                        f"see `mobility.{name}` below"
                        if name != "lust"
                        else "LuST rebuild options (`mobility.lust.LustConfig`); source lust only"
                    )
                if name == "calibration" and path == "compute":
                    default, meaning = "`null`", (f.description or "") + "; see `compute.calibration` below"
                lines.append(f"| `{name}` | {default} | {meaning} |")
        else:  # a dataclass of a lower layer, given as a mapping
            for fld in dc_fields(cast("type[DataclassInstance]", cls)):
                if fld.name == "cache_dir":
                    continue
                if isinstance(base, dict) and fld.name in base:
                    value = base[fld.name]
                elif fld.default is not MISSING:
                    value = fld.default
                elif fld.default_factory is not MISSING:
                    value = fld.default_factory()
                else:
                    value = None
                meaning = fld.metadata.get("doc", "")
                lines.append(f"| `{fld.name}` | {show(value)} | {meaning} |")
    lines += ["", "## device profiles", "", "Built in (`vmc_sim/compute/hardware.py`), for `compute.profile` and"]
    lines += ["`compute.coordinator_profile`; a job is charged its FLOPs over the charged FLOP/s.", ""]
    lines += profile_table()
    return "\n".join(lines) + "\n"


def training_defaults() -> str:
    """The table of local-training defaults in ``docs/federated.md``: a scenario's (``vmc run``, the embedded city's
    quick setting) beside a one-shot configuration's (``vmc oneshot``, seed 000's setting, FedFisher's)."""
    from .config import OneShotConfig

    run = Scenario().federated.train.model_dump(mode="json")
    oneshot = OneShotConfig().federated.train.model_dump(mode="json")
    lines = [
        "| `federated.train` key | scenario (`vmc run`) | one-shot config (`vmc oneshot`; seed 000's) |",
        "|---|---|---|",
    ]
    for key in run:
        lines.append(f"| `{key}` | `{run[key]}` | `{oneshot[key]}` |".replace("`None`", "`null`"))
    return "\n".join(lines) + "\n"
