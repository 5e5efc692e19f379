"""The contribution store verifies what it reads back: a file that differs from what was
written (weights, metadata, truncation) is an error naming the file and the client."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from fl_core.errors import CorruptFileError
from fl_core.fisher import layer_specs
from fl_core.store import ContributionStore


def make_store(tiny, path):
    return ContributionStore(path, "fp", "diagonal", layer_specs(tiny.model_fn()))


@pytest.fixture
def stored(tiny, tmp_path):
    pool = tiny.pool("diagonal")
    c = pool.train(3)
    store = make_store(tiny, tmp_path / "c")
    store.put(c)
    return store, c, store._path(3)


def test_round_trip_is_exact_and_indexed(tiny, stored, tmp_path):
    store, c, path = stored
    again = make_store(tiny, tmp_path / "c").get(3)
    assert again.digest == c.digest and again.compute_s == c.compute_s
    entry = json.loads(store.index_path.read_text())[path.name]
    assert entry["client"] == "3" and entry["meta"]["num_samples"] == c.num_samples and len(entry["sha256"]) == 64


def rewrite(path, tensors=None, meta_edit=None):
    with safe_open(str(path), framework="pt") as f:
        meta = json.loads(f.metadata()["vmc"])
    tensors = tensors or load_file(str(path))
    if meta_edit:
        meta.update(meta_edit)
    save_file(tensors, str(path), metadata={"vmc": json.dumps(meta)})


@pytest.mark.parametrize("damage", ["weights", "compute_s", "truncated"])
def test_a_changed_file_is_refused_naming_file_and_client(tiny, stored, tmp_path, damage):
    _, _, path = stored
    if damage == "weights":
        t = load_file(str(path))
        t["weights"] = torch.ones_like(t["weights"])
        rewrite(path, tensors=t)
    elif damage == "compute_s":
        rewrite(path, meta_edit={"compute_s": 500.0})
    else:
        path.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(CorruptFileError, match=rf"{path}: the stored contribution of client 3 does not match"):
        make_store(tiny, tmp_path / "c").get(3)


def test_unindexed_file_is_recomputed_and_a_broken_index_is_named(tiny, stored, tmp_path):
    store, _, path = stored
    store.index_path.unlink()
    fresh = make_store(tiny, tmp_path / "c")
    assert fresh.get(3) is None and "3" in fresh.recomputed
    store.index_path.write_text('{"abc": ')
    with pytest.raises(CorruptFileError, match="index.json: not a valid contribution index"):
        make_store(tiny, tmp_path / "c").get(3)


def test_a_file_of_another_configuration_is_recomputed_and_said(tiny, stored, tmp_path):
    other = ContributionStore(tmp_path / "c", "another-fp", "diagonal", layer_specs(tiny.model_fn()))
    assert other.get(3) is None
    assert other.recomputed == {"3": f"{stored[2].name} was computed for another configuration"}


def test_held_contributions_are_written_only_on_release(tiny, tmp_path):
    c = tiny.pool("diagonal").train(4)
    store = make_store(tiny, tmp_path / "h")
    store.hold()
    store.put(c)
    assert not (tmp_path / "h").exists() and store.get(4).digest == c.digest
    store.release()
    assert make_store(tiny, tmp_path / "h").get(4).digest == c.digest
