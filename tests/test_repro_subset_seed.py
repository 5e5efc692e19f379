"""tools/table2.py --subset-seed: another draw of F-SOSA's members over the same split and
contributions (the run seed's split, stores and training streams are untouched)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from fl_core.editors import FixedRatio, build_editor
from fl_core.experiment import OneShotSetup
from fl_core.projection import ProjectionConfig
from fl_core.training import TrainConfig


@pytest.fixture
def repro():
    from vmc_sim.reproduction import common

    return common


def members(repro, setup: OneShotSetup, subset_seed: int | None) -> list[int]:
    args = argparse.Namespace(subset_seed=subset_seed)
    editor = build_editor(
        "fsosa", setup.pool(), repro.subset_stream(setup, args, "fsosa"), FixedRatio(0.5), ProjectionConfig()
    )
    editor.sampler.initialize(list(range(20)))
    return sorted(editor.sampler.members)


def test_subset_seed_draws_other_members_over_the_same_split(repro):
    def setup() -> OneShotSetup:
        return OneShotSetup(
            dataset="digits",
            num_clients=20,
            alpha=0.5,
            model="mlp",
            seed=0,
            train=TrainConfig(epochs=1, fisher="diagonal"),
        )

    a, b = setup(), setup()
    default = members(repro, a, None)
    assert default == members(repro, b, None)  # without the option: the run seed's draw, as before
    draws = {tuple(members(repro, setup(), s)) for s in range(1, 6)}
    assert len(draws) > 1 and all(len(d) == 10 for d in draws)
    assert members(repro, setup(), 3) == members(repro, setup(), 3)  # a subset seed is a fixed draw
    for c in range(20):  # the split does not move
        assert np.array_equal(a.client_data[c].y.numpy(), setup().client_data[c].y.numpy())
