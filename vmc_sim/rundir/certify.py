"""``vmc certify RUN``: a proof of forgetting for every model a co-simulation released.

For every record of every request-driven method (``federated.methods``) the model a fresh fit on
the record's ``members`` gives is recomputed from the run itself: the same W0 and data (rebuilt
from the manifest), the contributions from the run's contribution store (each checked against its
SHA-256 in the store's index, the index against the manifest's fingerprint), the same merge at the
damping the record selected (:meth:`fl_core.editors.Editor.refit`), and compared value for value
with the model the run released (``released/``, :mod:`vmc_sim.rundir.released`). What a method
claims decides what a record proves (:class:`fl_core.editors.Exactness`): a method exact only in
distribution (F-SOSA's random subset) is proved equal to the merge of its recorded subset, the
subset's law being the sampler's (tested statistically, not per run); a method that claims no
exactness gets its distance to its exact refit reported, never a pass. Every record also checks
that no client that departed before it (and did not come back) is among its members.

The certificate (``RUN/certificate.json``, written under the run's lock as every reader's output:
:func:`vmc_sim.rundir.outputs.run_output`) holds the tolerance, the tool's versions, the seeds of the
subset draws, what it does not cover, and every record's result; ``passed`` is false, and the
command exits non-zero naming the record, when a record of a method that claims exactness differs
from its refit by more than the tolerance or any input fails verification.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fl_core.editors import EDITORS, Exactness

from .certify_records import MethodCheck, Refits, VerifiedContributions
from .directory import (
    CERTIFICATE_FILE,
    CERTIFY_TOLERANCE,
    FINGERPRINTED,
    RunDir,
    file_fingerprint,
    read_manifest,
    versions,
)
from .outputs import run_output
from .released import read_index

CERTIFICATE = CERTIFICATE_FILE
DEFAULT_TOLERANCE = CERTIFY_TOLERANCE
"""Largest absolute difference, per value, between a released model and its refit that still passes:
a closed-form merge or a mean refits to the last float32 bit, a CG merge to its solver tolerance."""

REQUIRED = ("records.jsonl", "released.jsonl", "contributions/index.json")
"""The files a certificate rests on: a completed run must have had their fingerprints recorded."""

NOT_COVERED = [
    "The subset's law: for a method exact only in distribution the certificate proves each released model "
    "equals the merge of its recorded subset; that the subset is distributed as retraining's (uniform over "
    "the current clients) is a property of the sampler, tested by chi-square in tests/test_sampler.py and, "
    "with take-outs, tests/test_arrival.py. The subset draws can be replayed from 'seeds'.",
    "The contributions themselves: each is checked against the SHA-256 the run recorded when it was "
    "computed, not trained again; that a client's contribution is its own training from W0 on its own data "
    "is the run's (contributions are a deterministic function of run seed, client id and configuration).",
    "The damping: a merge that selected its damping on the server's validation set is replayed at the "
    "damping its record names; the selection itself (held-out data no client holds) is not rerun.",
    "Multi-round strategies (federated.strategies): their round models are not a function of stored "
    "contributions and are not certified.",
    "The run directory as a whole: the certificate proves its released models consistent with its records "
    "and contributions; anyone able to rewrite every file (and the manifest's fingerprints) could forge a "
    "consistent run. Keep the certificate's 'inputs' digests to detect any later change.",
]

CLAIMS = {
    Exactness.DISTRIBUTION: "each released model equals the merge of its recorded subset (the record's members) "
    "of the run's contributions, at the recorded damping; no departed client is a member. Exact in "
    "distribution: the subset's law is the sampler's (see not_covered)",
    Exactness.EXACT: "each released model equals the merge of all its current clients' contributions at the "
    "recorded damping; no departed client is a member",
    Exactness.RERUN: "each released model equals the method's own fresh fit on the record's members (recomputed "
    "from the verified contributions, or retrained from W0 for a multi-round method); no departed client is "
    "a member",
    Exactness.NONE: "not exact: each released model's distance (largest absolute difference) to the exact "
    "refit of its clients (the reference method's fresh fit on the record's members) is reported, not a pass",
}


class CertifyError(ValueError):
    """A run that cannot be certified (not a completed co-simulation, no released models kept)."""


def certify_run(
    run: str | Path,
    tolerance: float = DEFAULT_TOLERANCE,
    methods: list[str] | None = None,
    out: str | Path | None = None,
    force: bool = False,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Certify ``run``'s released models and write the certificate (default ``RUN/certificate.json``,
    under the run's lock; an ``out`` that exists is replaced only with ``force``); returns it."""
    if not tolerance >= 0:
        raise CertifyError(f"--tolerance must be >= 0, got {tolerance}")
    path = Path(run)
    read_manifest(path / "manifest.json")  # a directory that is no run is refused before anything is written
    with run_output(path, CERTIFICATE, out, force) as target:
        t0 = time.perf_counter()
        cert = _certify(path, tolerance, methods, say)
        cert["wall_s"] = time.perf_counter() - t0
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(json.dumps(cert, indent=1))
        os.replace(tmp, target)
    say(_summary(cert))
    say(f"written: {target}")
    return cert


def _certify(run: Path, tolerance: float, only: list[str] | None, say: Callable[[str], None]) -> dict[str, Any]:
    from ..scenario.config import load_model
    from ..scenario.schema import Scenario

    manifest = read_manifest(run / "manifest.json")
    if manifest.get("kind") != "cosim":
        raise CertifyError(f"{run}: a {manifest.get('kind')!r} run; vmc certify reads co-simulation runs (vmc run)")
    if manifest.get("status") != "complete":
        raise CertifyError(f"{run}: status {manifest.get('status')!r}; vmc certify reads completed runs")
    missing = [n for n in REQUIRED if not isinstance(manifest.get(FINGERPRINTED[n]), dict)]
    if missing:
        raise CertifyError(
            f"{run}: its manifest fingerprints no {', '.join(missing)}: the run was recorded before its released "
            "models were kept; run it again to certify it"
        )
    inputs, problems = _verify_inputs(run, manifest)
    for p in problems:
        say(f"input failed verification: {p}")
    scenario = load_model(Scenario, None, manifest["config"])
    fed = scenario.federated
    unknown = [m for m in only or [] if m not in fed.methods]
    if unknown:
        raise CertifyError(f"{run}: no request-driven method {unknown} in this run; it ran {fed.methods}")
    records = _records(run / "records.jsonl")
    released = {(e["method"], e["record"]): e for e in read_index(run)}
    setup = fed.setup(scenario.seed)
    contributions = VerifiedContributions(run, scenario, setup)
    refits = Refits(scenario, setup, contributions, manifest)
    final = _final_models(run)
    results: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    for method in only or fed.methods:
        kind = EDITORS[method]
        check = MethodCheck(run, method, kind, refits, contributions, released, tolerance)
        mine = [r for r in records if r.get("method") == method]
        rows += check.run(mine, final.get(method))
        results[method] = {
            **check.summary(),
            "exactness": kind.exactness.value,
            "claim": CLAIMS[kind.exactness],
            "reference": kind.reference if kind.exactness is Exactness.NONE else None,
        }
    failed = [r for r in rows if r["result"] == "fail"]
    return {
        "run": str(run),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "tool": versions(),
        "tolerance": tolerance,
        "compared": "values" if scenario.coordinator.released_models == "all" else "digests",
        "passed": not failed and not problems,
        "failed_records": len(failed),
        "input_problems": problems,
        "inputs": inputs,
        "seeds": _subset_seeds(manifest),
        "methods": results,
        "not_covered": NOT_COVERED
        + [f"{s}: a multi-round strategy, not certified (see above)" for s in fed.strategies]
        + [f"{m}: not certified here (--method)" for m in fed.methods if only and m not in only],
        "records": rows,
    }


def _verify_inputs(run: Path, manifest: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Each fingerprinted file checked against the manifest (what failed, in words), and the digests
    a later reader can check the run against."""
    from fl_core.errors import CorruptFileError

    rd = RunDir(run, create=False)
    problems = []
    inputs: dict[str, Any] = {"manifest.json": hashlib.sha256((run / "manifest.json").read_bytes()).hexdigest()}
    for name in FINGERPRINTED:
        if not isinstance(manifest.get(FINGERPRINTED[name]), dict):
            continue
        try:
            rd.verify_file(name)
            inputs[name] = {**file_fingerprint(run / name), "verified": True}
        except CorruptFileError as e:
            problems.append(str(e))
            inputs[name] = {**file_fingerprint(run / name), "verified": False}
    return inputs, problems


def _records(path: Path) -> list[dict[str, Any]]:
    """The run's records as they are on disk (verified beforehand; a record that does not parse is
    refused naming its line)."""
    from fl_core.errors import CorruptFileError

    out = []
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if not line.endswith("\n") or not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise CorruptFileError(f"{path}:{i}: not a JSON record ({e.msg})") from None
            if isinstance(row, dict) and isinstance(row.get("method"), str):
                out.append(row)
    return out


def _final_models(run: Path) -> dict[str, Any]:
    """``models.safetensors`` by method (empty when the run saved none)."""
    from safetensors.torch import load_file

    path = run / "models.safetensors"
    if not path.is_file():
        return {}
    return {k.removesuffix(".weights"): v for k, v in load_file(str(path)).items() if k.endswith(".weights")}


def _subset_seeds(manifest: dict[str, Any]) -> dict[str, Any]:
    """The run seed and the seed of every subset-sampling stream the run opened (``fl_core.rng``:
    ``derive_seed(run_seed, "subset", method)``, ``..., method, "epoch", k`` after a withdrawal)."""
    seeds = manifest.get("seeds") or {}
    streams = seeds.get("streams") or {}
    return {
        "run_seed": seeds.get("run_seed"),
        "subset": {k: v for k, v in streams.items() if k.startswith("subset/")},
        "replay": "numpy.random.default_rng(seed) per stream drives fl_core.sampler.SubsetSampler, as the run did",
    }


def _summary(cert: dict[str, Any]) -> str:
    lines = [f"run {cert['run']}: tolerance {cert['tolerance']:g}, compared by {cert['compared']}"]
    lines.append(
        f"{'method':<16}{'claims':<14}{'records':>8}{'models':>8}{'passed':>8}{'failed':>8}  largest difference"
    )
    for m, s in cert["methods"].items():
        diff = s["max_abs_diff"]
        shown = "-" if diff is None else f"{diff:.3g}"
        lines.append(
            f"{m:<16}{s['exactness']:<14}{s['records']:>8}{s['models']:>8}{s['passed']:>8}{s['failed']:>8}  {shown}"
        )
    for p in cert["input_problems"]:
        lines.append(f"FAILED input: {p}")
    failed = [r for r in cert["records"] if r["result"] == "fail"]
    for r in failed[:10]:
        lines.append(f"FAILED {r['name']}: {'; '.join(r['reasons'])}")
    if len(failed) > 10:
        lines.append(f"... and {len(failed) - 10} more failed records (certificate.json lists them)")
    lines.append("certified" if cert["passed"] else "NOT certified")
    return "\n".join(lines)
