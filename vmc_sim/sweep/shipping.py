"""A sweep point that runs on a machine sharing no disk with the sweep's driver.

The driver packs what a point reads (its SUMO or trace input files, keeping their layout so a
``.sumocfg`` still finds what it names, and the dataset's files) into :class:`Bundle` s; the node
unpacks them into a directory of its own, verifying each file's SHA-256, runs the point there with
the scenario's paths pointing at the copies, and returns the run directory's files as a bundle;
the driver writes them into the sweep directory and verifies the run's own fingerprints before
anything reads them. Nothing on the node names a driver path.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fl_core.errors import CorruptFileError

INPUTS = "inputs"
DATA = "data"
PLACEHOLDER = "@driver-inputs"
"""What a shipped scenario's input paths start with until a node unpacks them."""


@dataclass(frozen=True)
class Bundle:
    """Files by path relative to a root, each with its SHA-256."""

    files: dict[str, bytes]
    digests: dict[str, str]

    @property
    def size(self) -> int:
        return sum(len(b) for b in self.files.values())


def pack(root: Path, paths: list[Path]) -> Bundle:
    """``paths`` (under ``root``) as a bundle."""
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in paths}
    return Bundle(files, {k: hashlib.sha256(v).hexdigest() for k, v in files.items()})


def pack_dir(root: Path) -> Bundle:
    """Every file under ``root`` as a bundle."""
    return pack(root, sorted(p for p in root.rglob("*") if p.is_file()))


def unpack(bundle: Bundle, into: Path, what: str) -> None:
    """Write ``bundle`` under ``into``, refusing (naming it) a file whose bytes do not match its
    digest: a file damaged on the way is never run on or recorded."""
    for rel, data in bundle.files.items():
        if hashlib.sha256(data).hexdigest() != bundle.digests.get(rel):
            raise CorruptFileError(f"{what}: {rel} arrived damaged (SHA-256 differs from the sender's)")
        target = into / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


Built = tuple[str, Bundle]
"""A cache entry built on the driver (a LuST build, a region cut): its name and files."""


def ship_scenario(scenario: Any) -> tuple[dict[str, Any], Bundle, tuple[str, Bundle] | None, list[Built]]:
    """The scenario as a node receives it (input paths under :data:`PLACEHOLDER`), its input files,
    its dataset's files (name and bundle; None for a built-in dataset), and the cache entries its
    source reads that the driver built (:meth:`vmc_sim.sources.base.SourceKind.built`): a node
    installs them instead of building them again."""
    from fl_core.data import dataset_files

    from ..scenario.input_digests import input_files
    from ..scenario.mobility_section import source_fields
    from ..sources.registry import SOURCES

    data = scenario.model_dump(mode="json")
    paths = [Path(p).resolve() for p in input_files(scenario)]
    files: dict[str, bytes] = {}
    if paths:
        root = Path(os.path.commonpath([p.parent for p in paths]))
        files.update({f"files/{k}": v for k, v in pack(root, paths).files.items()})
        data["mobility"] = _rewrite(data["mobility"], str(root), f"{PLACEHOLDER}/files")
    m = source_fields(scenario.mobility)
    extra = SOURCES[m.source].shipping(m, f"{PLACEHOLDER}/source")
    if extra is not None:  # e.g. LuST's sources: the node builds it (cached there) from the same content
        directory, fields = extra
        files.update({f"source/{k}": v for k, v in pack_dir(directory).files.items()})
        data["mobility"].update(fields)
    entries, patch = SOURCES[m.source].built(m, scenario.duration)
    for section, values in patch.items():
        data["mobility"][section] = {**data["mobility"][section], **values}
    built = [(entry.name, pack_dir(entry)) for entry in entries]
    inputs = Bundle(files, {k: hashlib.sha256(v).hexdigest() for k, v in files.items()})
    fed = scenario.federated
    base, data_files = dataset_files(fed.dataset, fed.data_root)
    dataset = None if base is None else (fed.dataset, pack(base, data_files))
    data["federated"]["data_root"] = None
    return data, inputs, dataset, built


def install_built(built: list[Built], what: str) -> None:
    """Put the driver's builds into this node's SUMO cache (each file checked against the driver's
    digest, then the entry against its own manifest); an entry already here is kept."""
    from mobility.cache import install

    for name, bundle in built:
        for rel, data in bundle.files.items():
            if hashlib.sha256(data).hexdigest() != bundle.digests.get(rel):
                raise CorruptFileError(
                    f"{what}: build {name}/{rel} arrived damaged (SHA-256 differs from the sender's)"
                )
        try:
            install(name, bundle.files)
        except ValueError as e:
            raise CorruptFileError(f"{what}: {e}") from None


def _rewrite(value: Any, old: str, new: str) -> Any:
    """``value`` with every string path under ``old`` moved under ``new``."""
    if isinstance(value, str) and (value == old or value.startswith(old + os.sep)):
        return new + value[len(old) :]
    if isinstance(value, dict):
        return {k: _rewrite(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_rewrite(v, old, new) for v in value]
    return value


def node_cache(sweep_id: str, kind: str) -> Path:
    """This node's cache directory for the sweep (``$VMC_CACHE`` or ``~/.cache/vmc-sim``), kept
    across the points that run here."""
    root = Path(os.environ.get("VMC_CACHE") or Path.home() / ".cache" / "vmc-sim")
    return root / "sweeps" / sweep_id / kind


class ActorPeer:
    """The sweep's contribution cache on the driver, reached through its Ray actor
    (:class:`fl_core.cache_peer.CacheKeeper`): what a node trains, every node can load."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def fetch(self, names: list[str]) -> dict[str, bytes]:
        import ray

        return ray.get(self.actor.fetch.remote(names)) if names else {}

    def push(self, files: dict[str, bytes]) -> None:
        import ray

        ray.get(self.actor.push.remote(files))


def run_shipped(
    task: dict[str, Any],
    inputs: Bundle,
    dataset: tuple[str, Bundle] | None,
    keepers: dict[str, Any] | None = None,
    *built: Built,
) -> dict[str, Any]:
    """On a node: install the driver's builds into the node's cache, unpack the point's inputs and
    data into a directory of its own, run it there and return its result with the run directory's
    files (``files``). With ``keepers`` (the sweep's cache actors, ``contributions`` and ``traces``)
    the node's caches fetch what they lack from them and send them what they compute. Never raises
    for the point's own failure (it is a result); a damaged input is a failed point naming the file."""
    from fl_core.cache_peer import set_peer
    from mobility.trace_cache import set_peer as set_trace_peer

    from .point import run_point

    keepers = keepers or {}
    set_peer(ActorPeer(keepers["contributions"]) if keepers.get("contributions") else None)
    set_trace_peer(ActorPeer(keepers["traces"]) if keepers.get("traces") else None)

    work = Path(tempfile.mkdtemp(prefix="vmc-point-"))
    try:
        scenario = task["scenario"]
        try:
            install_built(list(built), f"point {task['id']}")
            unpack(inputs, work / INPUTS, f"point {task['id']}")
            if dataset is not None:
                unpack(dataset[1], work / DATA, f"point {task['id']}, dataset {dataset[0]}")
                scenario = {**scenario, "federated": {**scenario["federated"], "data_root": str(work / DATA)}}
        except CorruptFileError as e:
            return {"id": task["id"], "status": "failed", "error": str(e), "rows": [], "host": platform.node()}
        scenario = {**scenario, "mobility": _rewrite(scenario["mobility"], PLACEHOLDER, str(work / INPUTS))}
        for section, key, kind in (
            ("compute", "contribution_cache", "contributions"),
            ("mobility", "trace_cache", "traces"),
        ):
            if scenario[section].get(key):
                scenario[section] = {**scenario[section], key: str(node_cache(task["sweep_id"], kind))}
        run_dir = work / "run"
        result = run_point({**task, "scenario": scenario, "run_dir": str(run_dir), "cwd": None})
        result["files"] = pack_dir(run_dir) if run_dir.is_dir() else None
        result["ran_in"] = str(run_dir)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def land(result: dict[str, Any], run_dir: Path) -> None:
    """Write a shipped point's run directory on the driver (whole, or not at all) and verify it
    against the fingerprints its manifest recorded at completion."""
    from ..rundir.directory import RunDir

    files: Bundle | None = result.pop("files", None)
    if files is None:
        return
    staging = run_dir.with_name(run_dir.name + ".landing")
    shutil.rmtree(staging, ignore_errors=True)
    unpack(files, staging, f"point {result['id']}'s results")
    shutil.rmtree(run_dir, ignore_errors=True)
    os.replace(staging, run_dir)
    run = RunDir(run_dir, create=False)
    for name in ("records.jsonl", "models.safetensors", "trace.jsonl"):
        run.verify_file(name)
