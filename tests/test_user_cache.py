"""The suite never touches the user's cache: every cache of the project resolves under the
suite's own ``VMC_CACHE`` (set in conftest.py, which also fails the run if ``~/.cache/vmc-sim``
changed during it)."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import TEST_CACHE, USER_CACHE

from fl_core.cache import default_root
from fl_core.data_files import cache_dir
from fl_core.flops import store_path
from mobility.cache import cache_root
from vmc_sim.compute.calibration import cache_file


def test_every_cache_of_the_project_lies_under_the_suite_s_own_directory():
    assert os.environ["VMC_CACHE"] == str(TEST_CACHE)
    for p in (cache_dir(), store_path(), cache_root(), cache_file(), default_root()):
        assert Path(p).resolve().is_relative_to(TEST_CACHE.resolve()), p
        assert not Path(p).resolve().is_relative_to(USER_CACHE.resolve()), p
