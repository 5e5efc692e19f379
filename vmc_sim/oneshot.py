"""``vmc oneshot``: fit every configured method on the same initial clients, replay the same
editing sequence against each, and record accuracy, bytes and time per request."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from fl_core.editors import build_editor
from fl_core.training import evaluate

from .rundir.directory import RunDir, new_run_dir
from .rundir.solves import unconverged_solves, warning_lines
from .scenario.config import OneShotConfig, parse_request

if TYPE_CHECKING:
    import torch


class _Subset(Protocol):
    """An editor that keeps a subset (F-SOSA and its variants, DENSE, FedLPA) of the clients 0..n-1."""

    @property
    def members(self) -> set[int]: ...


def run_oneshot(
    config: OneShotConfig,
    out: str | Path = "runs",
    say: Callable[[str], None] = print,
    progress: Callable[[str], None] | None = None,
) -> RunDir:
    """Fit every method, replay the requests, record each; ``progress`` (e.g. a stderr writer)
    gets a line before every fit or edit starts, so long work shows even when output is piped."""
    fed = config.federated
    setup = fed.setup(config.seed)
    run = RunDir(new_run_dir(out, config.name))
    pool = setup.pool()
    editors = {
        m: build_editor(
            m, pool, setup.streams.numpy("subset", m), fed.rule(), fed.projection_config(), options=fed.options_for(m)
        )
        for m in fed.methods
    }
    run.write_manifest(config.model_dump(mode="json"), setup.streams.manifest(), kind="oneshot")
    requests: list[tuple[str, list[int], list[int]]] = [("fit", list(range(config.initial_clients)), [])] + [
        ("edit", *parse_request(r, fed.num_clients, where=f"requests[{i}]")) for i, r in enumerate(config.requests)
    ]
    say(f"run directory: {run.path}")
    say(f"{'#':>3} {'request':<12} {'method':<10} {'trig':<5} {'acc %':>6} {'MB':>8} {'compute s':>9} {'solve s':>8}")
    for index, (kind, removed, added) in enumerate(requests):
        label = "fit" if kind == "fit" else ",".join([f"-{c}" for c in removed] + [f"+{c}" for c in added])
        for method, editor in editors.items():
            if progress is not None:
                what = f"fitting on {len(removed)} clients" if kind == "fit" else "editing"
                progress(f"[{index + 1}/{len(requests)}] {label}: {method}: {what} ...")
            report = editor.fit(removed) if kind == "fit" else editor.batch(removed, added, kind=_kind(removed, added))
            assert editor.model is not None  # fitted or edited just above
            acc, loss = evaluate(setup.model_fn(), editor.model, setup.test_set)
            record = {
                "index": index,
                "request": label,
                **report.as_dict(),
                "accuracy": acc,
                "loss": loss,
                "members": sorted(cast(_Subset, editor).members),
            }
            record.pop("transfers")
            run.append_record(record)
            solve = (
                ""
                if report.solve is None or report.solve.converged
                else f"  solve stopped at residual {report.solve.residual:.1e}"
            )
            say(
                f"{index:>3} {label:<12} {method:<10} {str(report.triggered):<5} {100 * acc:>6.2f} "
                f"{report.total_bytes / 1e6:>8.3f} {report.compute_s:>9.2f} {report.solve_s:>8.3f}{solve}"
            )
    models: dict[str, torch.Tensor] = {}
    for m, e in editors.items():
        assert e.model is not None  # every editor was fitted above
        models[f"{m}.weights"] = e.model
    run.save_tensors("models.safetensors", models)
    found = unconverged_solves(run.records())
    manifest = run.manifest()
    manifest.update(status="complete", unconverged_solves=found or None)
    run._atomic_json("manifest.json", manifest)
    say(_summary(run))
    for line in warning_lines(found, fed.projection.tol):
        say(line)
    return run


def _kind(removed: list, added: list) -> str:
    if len(removed) == 1 and not added:
        return "remove"
    if len(added) == 1 and not removed:
        return "add"
    return "batch"


def _summary(run: RunDir) -> str:
    totals: dict[str, dict[str, float]] = {}
    for r in run.records():
        t = totals.setdefault(r["method"], {"MB": 0.0, "compute_s": 0.0, "triggered": 0, "requests": 0, "acc": 0.0})
        t["MB"] += r["total_bytes"] / 1e6
        t["compute_s"] += r["compute_s"]
        t["triggered"] += int(r["triggered"] and r["kind"] != "fit")
        t["requests"] += int(r["kind"] != "fit")
        t["acc"] = r["accuracy"]
    lines = ["", "method      final acc %   total MB   compute s   triggered/requests"]
    for m, t in totals.items():
        lines.append(
            f"{m:<11} {100 * t['acc']:>11.2f} {t['MB']:>10.3f} {t['compute_s']:>11.2f}   "
            f"{int(t['triggered'])}/{int(t['requests'])}"
        )
    return "\n".join(lines)
