"""``vmc audit RUN``: membership inference against a run's stored models after its removals.

The federated setup (dataset, partition, W0) is rebuilt from the run's manifest, the models
come from ``models.safetensors`` (``<method>.weights``, written at the end of ``vmc oneshot``
and ``vmc run``), and the audited clients are those that ``records.jsonl`` shows removed and
not back in the client set at the end (or the ``--client`` ids given). Members are their
training samples, non-members unseen test samples with the same label histogram; every attack
of :mod:`fl_core.mia` runs on every stored model. The table is printed and ``audit.json``
is written into the run directory.

In a co-simulation with ``federated.shard_assignment: hash``, vehicles hold data shards by a hash
of their id (:func:`vmc_sim.scenario.shards.vehicle_shard`), so two vehicles may hold the same shard
(with ``arrival`` none do; the manifest's ``client_shards`` says which is whose). A removed
vehicle whose shard is still held by a vehicle in the final client set is left out of the
audit (its samples may rightly be in the model), and the output says so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Hashable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from fl_core.mia_audit import AuditConfig, audit, concat

from .directory import AUDIT_FILE, MODELS_FILE
from .outputs import run_output


class AuditError(ValueError):
    """A run directory that cannot be audited as asked; the message says why."""


def _federated(run: Path) -> tuple[Any, int, str, dict[str, Any]]:
    """(federated section, run seed, run kind, manifest) from ``run/manifest.json``."""
    from ..scenario.config import OneShotConfig, load_model

    path = run / "manifest.json"
    if not path.is_file():
        raise AuditError(f"{run}: not a run directory (no manifest.json)")
    manifest = json.loads(path.read_text())
    kind = manifest.get("kind")
    if kind == "oneshot":
        config = load_model(OneShotConfig, None, manifest["config"])
    elif kind == "cosim":
        from ..scenario.schema import Scenario

        config = load_model(Scenario, None, manifest["config"])
    else:
        raise AuditError(f"{run}: manifest.json has kind {kind!r}; vmc audit reads 'oneshot' and 'cosim' runs")
    return config.federated, config.seed, kind, manifest


def client_sets(records: list[dict[str, Any]]) -> tuple[list[Hashable], set[Hashable]]:
    """(every client ever removed in request order, the union over methods of the final client sets)."""
    current: dict[str, set] = {}
    removed: list[Hashable] = []
    for r in records:
        method, kind = r.get("method"), r.get("kind")
        if method is None or kind is None:
            continue  # e.g. requests that cancelled out
        clients = current.setdefault(method, set())
        if kind in ("fit", "suspend"):  # a fresh fit, or a withdrawn model (its clients go with it)
            clients.clear()
        clients.difference_update(r.get("removed", []))
        if kind not in ("suspend", "suspended"):
            clients.update(r.get("added", []))
        removed += [c for c in r.get("removed", []) if c not in removed]
    final = set().union(*current.values()) if current else set()
    return removed, final


def _load_models(run: Path, checkpoint: str, methods: list[str] | None) -> dict[str, Any]:
    from safetensors.torch import load_file

    path = run / checkpoint
    if not path.is_file():
        raise AuditError(
            f"{run}: no stored model ({checkpoint} is missing). Models are saved when a run completes; "
            f"a run that failed or was recorded by an older version has none: rerun it to audit it"
        )
    from .directory import FINGERPRINTED, RunDir

    if checkpoint in FINGERPRINTED:
        RunDir(run, create=False).verify_file(checkpoint)  # a changed or cut model file is refused naming it
    stored = {k[: -len(".weights")]: v for k, v in load_file(str(path)).items() if k.endswith(".weights")}
    if not stored:
        raise AuditError(f"{path}: holds no '<method>.weights' tensor")
    if methods:
        unknown = [m for m in methods if m not in stored]
        if unknown:
            raise AuditError(f"{path}: no model for method(s) {unknown}; stored: {sorted(stored)}")
        stored = {m: stored[m] for m in methods}
    return stored


def audit_run(
    run: str | Path,
    clients: list[str] | None = None,
    methods: list[str] | None = None,
    checkpoint: str = MODELS_FILE,
    config: AuditConfig = AuditConfig(),
    seed: int | None = None,
    out: str | Path | None = None,
    say: Callable[[str], None] = print,
    force: bool = False,
) -> dict[str, Any]:
    """Audit ``run``'s stored models; returns what is written to ``out`` (default ``run/audit.json``,
    written under the run's lock; an ``out`` that exists is replaced only with ``force``).

    ``seed`` seeds the audit's draws (default: the run's seed; ``config.seed`` is replaced)."""
    federated = _federated(Path(run))  # a directory that is no run is refused before anything is written
    with run_output(run, AUDIT_FILE, out, force) as path:
        return _audit_into(path, Path(run), federated, clients, methods, checkpoint, config, seed, say)


def _audit_into(
    path: Path,
    run: Path,
    federated: tuple[Any, int, str, dict[str, Any]],
    clients: list[str] | None,
    methods: list[str] | None,
    checkpoint: str,
    config: AuditConfig,
    seed: int | None,
    say: Callable[[str], None],
) -> dict[str, Any]:
    from ..scenario.shards import recorded_shards
    from .directory import RunDir

    fed, run_seed, kind, manifest = federated
    models = _load_models(run, checkpoint, methods)
    records = list(RunDir(run, create=False).records())
    removed, final = client_sets(records)
    known = {str(c): c for r in records for key in ("added", "removed") for c in r.get(key, [])}
    notes: list[str] = []
    if clients:
        targets = []
        for text in clients:
            if text not in known:
                raise AuditError(f"{run}: client {text!r} appears in no request of records.jsonl")
            targets.append(known[text])
            if known[text] in final:
                notes.append(
                    f"client {text} is in the final client set (not removed): members may rightly be "
                    f"in the model, so high attack scores are expected if it is a member"
                )
    else:
        targets = [c for c in removed if c not in final]
        if not targets:
            raise AuditError(
                f"{run}: no removal to audit: records.jsonl shows no client removed and absent at "
                f"the end (give --client ID to audit a client anyway)"
            )
    config = replace(config, seed=run_seed if seed is None else seed)
    setup = fed.setup(run_seed)
    shards = len(setup.client_data)
    shard_of = (lambda c: int(c)) if kind == "oneshot" else recorded_shards(manifest, run_seed, shards)
    excluded = []
    if kind == "cosim":
        held = {shard_of(c) for c in final}
        for c in list(targets):
            if shard_of(c) in held and c not in final:
                if clients:
                    notes.append(f"vehicle {c}'s data shard is still held by a vehicle in the final client set")
                    continue
                targets.remove(c)
                excluded.append(c)
        if excluded:
            notes.append(
                f"left out {len(excluded)} removed vehicle(s) whose data shard is still held by a vehicle "
                f"in the final client set: {', '.join(map(str, excluded[:10]))}"
                + (" ..." if len(excluded) > 10 else "")
            )
        if not targets:
            raise AuditError(
                f"{run}: every removed vehicle's data shard is still held by a present vehicle; "
                f"nothing was truly removed (give --client ID to audit one anyway)"
            )
    shard_ids = sorted({shard_of(c) for c in targets})
    members = concat([setup.client_data[s] for s in shard_ids])
    model_dim = setup.w0.numel()
    for m, w in models.items():
        if w.numel() != model_dim:
            raise AuditError(
                f"{run}/{checkpoint}: model {m!r} has {w.numel()} values, the run's {fed.model} has {model_dim}"
            )
    report = audit(setup.model_fn, models, members, setup.test_set, setup.train, config)
    report.notes[:0] = notes
    result = {
        "run": str(run),
        "checkpoint": checkpoint,
        "kind": kind,
        "dataset": fed.dataset,
        "model": fed.model,
        "seed": run_seed,
        "clients": [str(c) for c in targets],
        "shards": shard_ids,
        "excluded": [str(c) for c in excluded],
        "member_samples": len(members),
        "config": {**asdict(config), "attacks": [a.value for a in config.attacks]},
        **report.as_dict(),
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=2))
    os.replace(tmp, path)
    say(f"run {run} ({kind}, {fed.dataset}/{fed.model}, seed {run_seed}, audit seed {config.seed})")
    say(
        f"audited client(s): {', '.join(result['clients'])} ({len(members)} training samples; "
        f"{report.n_members} members vs {report.n_nonmembers} unseen test samples, label-matched: "
        f"{config.match_labels})"
    )
    say(report.table())
    say(
        "50 % = chance: the attack cannot tell the removed samples from unseen ones. "
        "+-2se: twice the AUC's standard error under no leakage."
    )
    say(f"written: {path}")
    return result
