"""The replicated LuST case study's design as data: the settings and Fisher settings a run can
take (as changes to the scenario), the arms that say which seeds a replicate moves, the run-seed
offset that gives each dataset its own draws, and the one function that turns a replicate, a
setting and a dataset into a run's scenario (``tools/lust_case_study_replicates.py`` runs them;
reports/lust_case_study/PLAN.md, "Replicate design")."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from ..cosim import replay_mobility

SETTINGS: dict[str, dict[str, Any]] = {
    # on-board units (profile null: the on-board default, a Jetson AGX Orin); links outlast the dwell
    "paper": {"compute": {"mode": "onboard", "profile": None}, "coordinator": {"dwell_limited": False}},
    "physics": {},
    # the paper setting with compute, not the 802.11p uploads, dominating Retrain's time (a
    # sensitivity setting, not a measured device): what the paper's time saving needs
    "paper_cpu": {
        "compute": {
            "mode": "onboard",
            "profile": {
                "name": "onboard_cpu_class",
                "flops_per_s": 2.1e10,
                "source": "sensitivity setting: the Jetson AGX Orin profile's 1.59e12 / 75",
                "description": "a CPU-class on-board unit",
            },
        },
        "coordinator": {"dwell_limited": False},
    },
}
"""Each setting as changes to the scenario (the physics setting is the scenario as written, on the
city's radio: :data:`DEFAULT_RADIO`)."""

DEFAULT_RADIO = ("physics",)
"""Settings whose channel section is the toolkit's default, the city's radio (line of sight, NLOSv
and NLOS per link with shadowing, neighbouring RSUs sharing the air: docs/channel.md), in place of
the scenario's. The paper setting keeps the link the scenario names, as the seed's case study
assumes links that hold; the physics setting is the radio a city gives."""

FISHERS: dict[str, dict[str, Any]] = {
    "diagonal": {"train": {"fisher": "diagonal"}},
    # seed 000's default (VI-A: "the two-layer CNN from [8] with K-FAC Fisher approximation"), its
    # factors "further compressed using low-rank decomposition and quantization" (Appendix B-E):
    # rank 128, fp16 (0.77 MB a client here, the seed's Table VII 0.88 MB). Damping: the weighted
    # mean or 1.0 on validation (the K-FAC case study selected 1.0 in all of its 110 solves)
    "kfac": {"train": {"fisher": "kfac", "fisher_rank": 128}, "projection": {"dampings": ["mean", 1.0]}},
}
"""``--fisher``: each Fisher setting as changes to the scenario's ``federated`` section."""


def merge(base: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``change`` merged in, section by section."""
    out = copy.deepcopy(base)
    for k, v in change.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


ARMS = ("both", "traffic", "members")
"""``--vary``: which seeds a replicate moves on by its number."""


def replicate(base: dict[str, Any], r: int, arm: str = "both") -> dict[str, Any]:
    """Replicate ``r`` of ``base`` in ``arm``: ``both`` moves the traffic seed and the run seed on
    by ``r``, ``traffic`` only SUMO's seed, ``members`` only the run seed (the member draw, with the
    data split and W0 it also seeds)."""
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r} (one of {', '.join(ARMS)})")
    data = copy.deepcopy(base)
    data["seed"] = base["seed"] + (r if arm in ("both", "members") else 0)
    data["mobility"]["sumo"]["seed"] = base["mobility"]["sumo"]["seed"] + (r if arm in ("both", "traffic") else 0)
    data["name"] = f"{base['name']}-r{r}" if arm == "both" else f"{base['name']}-{arm}-r{r}"
    return data


def dataset_offset(dataset: str) -> int:
    """The run-seed offset of ``dataset`` under ``--dataset-draws own``: a multiple of 1,000 fixed by
    the dataset's name (stable across processes and machines), so every dataset draws its own
    members and triggers and replicates stay apart (base + r with r below 1,000)."""
    from fl_core.rng import derive_seed

    return 1000 * (1 + derive_seed(0, "dataset-draws", dataset) % 997)


DATASETS: dict[str, dict[str, Any]] = {
    # seed 000, VI-A: "FEMNIST, as a FL dataset, naturally exhibits non-IID characteristics; we
    # follow [9], sampling 10% of users and grouping into M clients": its writers (here LEAF's
    # 5 % sample, 184 writers) grouped into the shards instead of a Dirichlet split
    "femnist": {"alpha": None},
}
"""Changes to the ``federated`` section a dataset needs (the others take the scenario's split)."""


def task(data: dict[str, Any], setting_name: str, dataset: str, trace: Path, own_draws: bool = False) -> dict[str, Any]:
    """One run: replicate ``data`` in ``setting_name`` on ``dataset``, replaying ``trace``; with
    ``own_draws`` the run seed moves on by :func:`dataset_offset`."""
    out = merge(data, SETTINGS[setting_name])
    if setting_name in DEFAULT_RADIO:
        out["channel"] = {}
    out["federated"] = merge(out["federated"], {"dataset": dataset, **DATASETS.get(dataset, {})})
    out["mobility"] = replay_mobility(data, trace)
    out["name"] = f"{data['name']}-{setting_name}-{dataset}"
    if own_draws:
        out["seed"] = data["seed"] + dataset_offset(dataset)
    return out
