"""What ``vmc certify`` does record by record (:mod:`vmc_sim.rundir.certify`): the run's contributions
read back verified, fresh fits on a record's members, and each record's check against the model the
run released."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from fl_core.clients import ClientPool
from fl_core.contribution import Contribution
from fl_core.editors import EditorKind, Exactness, build_editor
from fl_core.errors import CorruptFileError, EditError
from fl_core.fisher import layer_specs
from fl_core.store import ContributionStore
from fl_core.training import LocalTrainer

from ..scenario.shards import recorded_shards
from ..scenario.store_key import store_fingerprint
from .released import load_released, model_digest

if TYPE_CHECKING:
    from fl_core.experiment import OneShotSetup

    from ..scenario.schema import Scenario

REPORT_KINDS = ("fit", "remove", "add", "batch")
"""Record kinds after which the method released a model (``none``/``unsupported`` keep the one before;
``suspend``/``suspended`` serve none)."""


class VerifiedContributions:
    """The run's contribution store as a client pool's source that only reads: each contribution checked
    against the SHA-256 its index recorded (:class:`fl_core.store.ContributionStore`); one that is
    missing or was computed for another client or configuration is refused naming the client."""

    def __init__(self, run: Path, scenario: Scenario, setup: OneShotSetup) -> None:
        self.store = ContributionStore(
            run / "contributions", store_fingerprint(scenario), setup.train.fisher, layer_specs(setup.model_fn())
        )
        self.used: dict[Hashable, str] = {}  # client -> the SHA-256 of the stored file read for it

    def get(self, client: Hashable, /) -> Contribution:
        found = self.store.get(client)  # a file that differs from its recorded digest raises here
        if found is None:
            why = self.store.recomputed.get(repr(client), "not in the run's contribution store")
            raise CorruptFileError(f"{self.store.directory}: no verified contribution of client {client!r} ({why})")
        self.used[client] = str(self.store.file_digest(client))
        return found

    def put(self, contribution: Contribution, /, trained: bool = False) -> None:
        raise RuntimeError("vmc certify never writes into a run's contribution store")


class Refits:
    """Fresh fits on given members, each by a fresh editor of the method (or its reference) over one
    client pool on the run's verified contributions; the last fit of each editor is kept, so records
    that changed nothing refit nothing."""

    def __init__(
        self, scenario: Scenario, setup: OneShotSetup, contributions: VerifiedContributions, manifest: dict
    ) -> None:
        self.fed, self.setup = scenario.federated, setup
        shards = setup.client_data
        shard_of = recorded_shards(manifest, scenario.seed, len(shards))
        trainer = LocalTrainer(setup.model_fn, setup.w0, setup.train, setup.streams)
        self.pool = ClientPool(trainer, lambda v: shards[shard_of(v)], store=contributions, validator=setup.validator())
        self._last: dict[str, tuple[Any, torch.Tensor]] = {}

    def model(self, name: str, members: list[Hashable], solve: dict[str, Any] | None) -> torch.Tensor:
        """The model editor ``name``'s fresh fit on ``members`` gives (at ``solve``'s damping, if any)."""
        key = (tuple(members), None if solve is None else (solve.get("damping"), len(solve.get("candidates") or ())))
        last = self._last.get(name)
        if last is not None and last[0] == key:
            return last[1]
        fed = self.fed
        editor = build_editor(
            name,
            self.pool,
            self.setup.streams.numpy("subset", name),
            fed.rule(),
            fed.projection_config(),
            rounds=fed.rounds.build(),
            options=fed.options_for(name),
        )
        model = editor.refit(members, solve).detach().clone()
        self._last[name] = (key, model)
        return model


def final_solve(row: dict[str, Any]) -> dict[str, Any] | None:
    """The solve behind the model a record released: its last take-out's that solved, else its own."""
    solves = [row.get("solve"), *[t.get("solve") for t in row.get("take_outs") or []]]
    return next((s for s in reversed(solves) if s), None)


class MethodCheck:
    """One method's records checked in order against their refits (:meth:`run`), and the totals."""

    def __init__(
        self,
        run: Path,
        method: str,
        kind: EditorKind,
        refits: Refits,
        contributions: VerifiedContributions,
        released: dict[tuple[str, int], dict[str, Any]],
        tolerance: float,
    ) -> None:
        self.run_path, self.method, self.kind = run, method, kind
        self.refits, self.contributions, self.released, self.tolerance = refits, contributions, released, tolerance
        self.claims = kind.exactness is not Exactness.NONE
        self.results: list[dict[str, Any]] = []
        self._models: dict[str, torch.Tensor] = {}

    def run(self, rows: list[dict[str, Any]], final: torch.Tensor | None) -> list[dict[str, Any]]:
        """Every record's result; ``final``: the method's model in ``models.safetensors``."""
        gone: dict[Hashable, int] = {}  # departed (or taken out) and not back -> the record it left at
        solve: dict[str, Any] | None = None
        served: str | None = None  # the digest of the model being served
        last_released = max((k for m, k in self.released if m == self.method), default=None)
        for k, row in enumerate(rows):
            kind = row.get("kind")
            added = set(row.get("added") or [])
            take_outs = row.get("take_outs") or []
            departed = (set(row.get("removed") or []) - added) | {c for t in take_outs for c in t.get("departed", [])}
            taken_out = {c for t in take_outs for c in t.get("removed", [])}
            for c in added:
                gone.pop(c, None)
            for c in departed | taken_out:
                gone[c] = k
            members = list(row.get("members") or [])
            res: dict[str, Any] = {
                "name": f"{self.method} record {k} (request {row.get('index')}, {kind} at t={_time(row)})",
                "method": self.method,
                "record": k,
                "index": row.get("index"),
                "kind": kind,
                "time": row.get("done_time"),
                "members": members,
                "departed": sorted(departed, key=str),
                "taken_out": sorted(taken_out, key=str),
                "model_sha256": None,
                "contributions": None,
                "refit": None,
                "max_abs_diff": None,
                "result": None,
                "reasons": [],
            }
            holding = sorted(set(members) & gone.keys(), key=str)
            if holding:
                res["reasons"].append(
                    "its members include client(s) that departed or were taken out before it: "
                    + ", ".join(f"{c} (at record {gone[c]})" for c in holding)
                )
            if kind in REPORT_KINDS:
                solve = final_solve(row) or solve
                self._released(res, row, k, members, solve, final if k == last_released else None)
                served = res["model_sha256"]
            elif kind in ("suspend", "suspended"):
                solve, served = None, None
                res["result"] = "withdrawn"
            else:  # nothing new was released: the model before is served on
                res["model_sha256"] = served
                res["result"] = "unchanged"
            if holding and self.claims and res["result"] != "withdrawn":
                res["result"] = "fail"
            self.results.append(res)
        if final is not None and self.results:
            self._final(final)
        return self.results

    def _released(
        self,
        res: dict[str, Any],
        row: dict[str, Any],
        k: int,
        members: list[Hashable],
        solve: dict[str, Any] | None,
        final: torch.Tensor | None,
    ) -> None:
        """Refit record ``k``'s members and compare the refit with the model it released."""
        entry = self.released.get((self.method, k))
        if entry is None:
            res["result"] = "fail"
            res["reasons"].append("no released model is kept for it (released.jsonl)")
            return
        res["model_sha256"] = entry.get("model_sha256")
        if entry.get("index") != row.get("index"):
            res["reasons"].append(f"released.jsonl keeps the model of request {entry.get('index')} for it")
        name = self.method if self.claims else self.kind.reference
        if name is None:
            res["result"] = "not_certified"
            res["reasons"].append(f"{self.method} claims no exactness and names no reference refit")
            return
        own = name == self.method
        res["refit"] = {"method": name, "damping": solve.get("damping") if own and solve is not None else None}
        try:
            refit = self.refits.model(name, members, solve if own else None)
        except (CorruptFileError, EditError, ValueError, KeyError) as e:
            res["result"] = "fail"
            res["reasons"].append(f"no refit: {e}")
            return
        finally:
            used = {str(c): self.contributions.used[c] for c in members if c in self.contributions.used}
            res["contributions"] = used or None
        try:
            stored = self._stored(entry, final)
        except CorruptFileError as e:
            res["result"] = "fail"
            res["reasons"].append(f"its released model failed verification: {e}")
            return
        if stored is not None:
            if stored.numel() != refit.numel():
                res["reasons"].append(f"the released model has {stored.numel()} values, the refit {refit.numel()}")
            else:
                diff = float((stored.double() - refit.double()).abs().max()) if stored.numel() else 0.0
                res["max_abs_diff"] = diff
                if diff > self.tolerance and self.claims:
                    res["reasons"].append(
                        f"the released model differs from a fresh fit on its {len(members)} members by {diff:.3g} "
                        f"(tolerance {self.tolerance:g})"
                    )
        elif model_digest(refit) != entry.get("model_sha256") and self.claims:
            res["reasons"].append(
                f"the released model's SHA-256 {str(entry.get('model_sha256'))[:12]} is not that of a fresh fit on "
                f"its {len(members)} members ({model_digest(refit)[:12]}); keep the models "
                "(coordinator.released_models: all) to measure the difference"
            )
        if not self.claims:
            res["result"] = "distance"
        else:
            res["result"] = "fail" if res["reasons"] else "pass"

    def _stored(self, entry: dict[str, Any], final: torch.Tensor | None) -> torch.Tensor | None:
        """The released model (None: only its digest is kept, and ``final`` is not it)."""
        digest = str(entry.get("model_sha256"))
        if digest in self._models:
            return self._models[digest]
        if entry.get("file"):
            model = load_released(self.run_path, entry)
        elif final is not None and model_digest(final) == digest:
            model = final
        else:
            return None
        self._models = {digest: model}  # the model served until the next one
        return model

    def _final(self, final: torch.Tensor) -> None:
        """The final model in ``models.safetensors`` must be the last one released."""
        last = next((r for r in reversed(self.results) if r["model_sha256"] is not None), None)
        if last is None or model_digest(final) != last["model_sha256"]:
            where = self.results[-1] if last is None else last
            where["reasons"].append("models.safetensors holds another final model than the last one released")
            if self.claims:
                where["result"] = "fail"

    def summary(self) -> dict[str, Any]:
        """How many records, released models, passes and failures, and the largest difference."""
        diffs = [r["max_abs_diff"] for r in self.results if r["max_abs_diff"] is not None]
        count = {key: sum(r["result"] == key for r in self.results) for key in ("pass", "fail", "distance")}
        return {
            "records": len(self.results),
            "models": sum(r["kind"] in REPORT_KINDS for r in self.results),
            "passed": count["pass"],
            "failed": count["fail"],
            "distances": count["distance"],
            "unchanged": sum(r["result"] == "unchanged" for r in self.results),
            "withdrawn": sum(r["result"] == "withdrawn" for r in self.results),
            "max_abs_diff": max(diffs) if diffs else None,
        }


def _time(row: dict[str, Any]) -> str:
    t = row.get("done_time")
    return f"{t:.1f} s" if isinstance(t, (int, float)) else "?"
