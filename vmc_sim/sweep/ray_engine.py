"""A sweep's points as Ray tasks, on one machine or a cluster.

Without a shared disk (the default) a point's inputs travel with its task and its run directory
comes back through Ray (:mod:`.shipping`); with ``shared_dir: true`` every node must see the sweep
directory at the same path, which is checked at start on every node. A point whose worker or node
dies is run again elsewhere, up to ``retries`` times, each attempt recorded with the point.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..scenario.config import ConfigError

Done = Callable[[dict[str, Any]], None]


def _init(workers: int, address: str | None) -> bool:
    """Join ``address`` or start a local instance of ``workers`` CPUs; whether this call started it."""
    try:
        import ray
    except ImportError:
        raise ConfigError("engine 'ray' needs Ray: install the project's 'ray' extra") from None
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING}
    if address:
        ray.init(address=address, **options)
    else:
        ray.init(num_cpus=workers, **options)
    return True


def _probe(path: str, token_file: str, token: str) -> tuple[str, bool]:
    """On a node: its name and whether it sees the driver's ``token`` in ``token_file`` and may
    write into ``path``."""
    import platform

    p = Path(token_file)
    sees = p.is_file() and p.read_text() == token and os.access(path, os.W_OK)
    return platform.node(), sees


def check_shared(sweep_dir: Path) -> list[str]:
    """Every alive node with CPUs must see ``sweep_dir`` (the same files, writable); refuse in one
    line naming the first node that does not. Returns the nodes checked."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    token = secrets.token_hex(16)
    token_file = sweep_dir / ".shared-dir-check"
    token_file.write_text(token)
    try:
        probe = ray.remote(num_cpus=0)(_probe)
        nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]
        refs = {
            probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(
                str(sweep_dir), str(token_file), token
            ): n
            for n in nodes
        }
        checked = []
        for ref, node in refs.items():
            name, sees = ray.get(ref)
            if not sees:
                raise ConfigError(
                    f"shared_dir: node {node.get('NodeManagerAddress')} ({name}) cannot see the sweep directory "
                    f"{sweep_dir} (set shared_dir: false to send inputs and results through Ray)"
                )
            checked.append(f"{node.get('NodeManagerAddress')} ({name})")
        return checked
    finally:
        token_file.unlink(missing_ok=True)


def _keeper(root: Path) -> Any:
    """One of the sweep's caches (contributions, traces) as a Ray actor on the driver's node (its disk), so every
    node fetches from and sends to the one copy under ``root``."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from fl_core.cache_peer import CacheKeeper

    here = ray.get_runtime_context().get_node_id()
    actor = ray.remote(num_cpus=0)(CacheKeeper)
    return actor.options(scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)).remote(str(root))


def _retryable(exc: BaseException) -> bool:
    """A failure of the machinery (a worker or node died, an object was lost), not of the point."""
    import ray.exceptions as rex

    return not isinstance(exc, rex.RayTaskError)


def run_ray(
    tasks: list[dict[str, Any]],
    workers: int,
    address: str | None,
    done: Done,
    *,
    shared_dir: bool = False,
    sweep_dir: Path | None = None,
    retries: int = 2,
    say: Callable[[str], None] = print,
) -> None:
    """Run every task (``run_point``'s dict) as a Ray task on one CPU, ``done(result)`` as each
    finishes: through Ray without a shared disk, on the shared ``sweep_dir`` otherwise."""
    import ray

    from ..rundir.directory import RunDir
    from .point import failure, run_point
    from .shipping import land, run_shipped, ship_scenario
    from .tables import method_totals

    started = _init(workers, address)
    try:
        if shared_dir:
            assert sweep_dir is not None
            nodes = check_shared(sweep_dir)
            say(f"shared_dir: {len(nodes)} node(s) see {sweep_dir}")
            remote = ray.remote(num_cpus=1, max_calls=1, max_retries=0)(run_point)

            def submit(t: dict[str, Any]) -> Any:
                return remote.remote(t)

        else:
            from ..scenario.config import load_model
            from ..scenario.schema import Scenario

            shipped = ray.remote(num_cpus=1, max_calls=1, max_retries=0)(run_shipped)
            keepers: dict[str, Any] = {}
            if sweep_dir is not None and any(t["scenario"]["compute"].get("contribution_cache") for t in tasks):
                keepers["contributions"] = _keeper(sweep_dir / "contribution_cache")
            if sweep_dir is not None and any(t["scenario"]["mobility"].get("trace_cache") for t in tasks):
                keepers["traces"] = _keeper(sweep_dir / "trace_cache")
            objects: dict[tuple[str, str], Any] = {}  # one copy in the object store per distinct bundle
            prepared: dict[str, tuple[dict[str, Any], Any, Any, list[Any]]] = {}
            for t in tasks:
                scenario, inputs, dataset, built = ship_scenario(load_model(Scenario, None, t["scenario"]))
                built_refs = [  # each build once in the object store, however many points read it
                    objects.setdefault(("built", name), ray.put((name, bundle))) for name, bundle in built
                ]
                key = ("inputs", repr(sorted(inputs.digests.items())))
                in_ref = objects.setdefault(key, ray.put(inputs))
                data_ref = None
                if dataset is not None:
                    dkey = ("data", repr(sorted(dataset[1].digests.items())))
                    data_ref = objects.setdefault(dkey, ray.put(dataset))
                prepared[t["id"]] = ({**t, "scenario": scenario}, in_ref, data_ref, built_refs)

            def submit(t: dict[str, Any]) -> Any:
                task, in_ref, data_ref, built_refs = prepared[t["id"]]
                return shipped.remote(task, in_ref, data_ref, keepers, *built_refs)

        attempts: dict[str, list[dict[str, Any]]] = {t["id"]: [] for t in tasks}
        refs = {submit(t): t for t in tasks}
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            task = refs.pop(ready[0])
            try:
                result = ray.get(ready[0])
            except Exception as e:
                attempts[task["id"]].append({"error": f"{type(e).__name__}: {e}"[:500], "at": time.time()})
                if _retryable(e) and len(attempts[task["id"]]) <= retries:
                    say(f"{task['id']}: {type(e).__name__} (its worker or node is gone); running it again")
                    refs[submit(task)] = task
                    continue
                result = failure(task, e)
            if not shared_dir and result.get("files") is not None:
                try:
                    land(result, Path(task["run_dir"]))
                    result["rows"] = method_totals(RunDir(task["run_dir"], create=False))  # as landed
                except Exception as e:  # a result that does not verify is a failed point, never recorded as good
                    result = {**failure(task, e), "host": result.get("host")}
            result.pop("files", None)
            result["attempts"] = attempts[task["id"]]
            done(result)
    finally:
        if started:
            ray.shutdown()
