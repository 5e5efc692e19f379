"""``vmc certify``: a run with churn (departures mid-upload, take-outs of what never arrived,
withdrawals) certifies; a released model changed by one value, a contribution swapped for another
client's, or a member list edited each fail naming the record, whether or not the manifest's
fingerprints were forged to match; a run whose lock another process holds is refused, and certify
changes nothing but its certificate."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import TinySetup, small_scenario
from safetensors.torch import load_file, save_file

from mobility.events import MobilityEvent
from mobility.trace import write_trace
from vmc_sim.cli import main
from vmc_sim.cosim import run_scenario
from vmc_sim.rundir.directory import FINGERPRINTED, file_fingerprint
from vmc_sim.rundir.lock import writer_alive
from vmc_sim.rundir.released import file_name, model_digest, read_index

METHODS = ["fsosa", "retrain", "fedavg", "federaser"]


def churn_trace(path: Path) -> Path:
    """Six vehicles at the start, then twelve arrivals that stay 1.5, 9 or 30 s (the short ones leave
    mid-upload), and the first vehicles leaving one by one: the cell empties and fills again."""
    events = [MobilityEvent(float(i), "join", f"v{i}", "rsu0", 20.0 * i, 10.0, 5.0) for i in range(6)]
    t = 20.0
    for k in range(12):
        events.append(MobilityEvent(t, "join", f"n{k}", "rsu0", 50.0, -30.0, 8.0))
        events.append(MobilityEvent(t + (1.5, 9.0, 30.0)[k % 3], "leave", f"n{k}", "rsu0", 280.0, 0.0, 10.0))
        if k % 2 == 1:
            events.append(MobilityEvent(t + 4.0, "leave", f"v{k // 2}", "rsu0", 280.0, 0.0, 10.0))
        t += 6.0
    events.sort(key=lambda e: e.time)
    meta = {
        "source": "test",
        "clock": {"begin": 0.0, "step_length": 1.0},
        "rsus": [{"id": "rsu0", "x": 0.0, "y": 0.0, "radius": 300.0}],
        "coverage": {},
    }
    return write_trace(path / "trace.jsonl", events, meta, end_time=t + 40.0)


def churn_scenario(trace: Path, **over: Any):
    """F-SOSA, Retrain, one-shot FedAvg and FedEraser (not exact) on a slow device, so uploads fail."""
    fed = {
        "rho": 0.5,
        "methods": METHODS,
        "train": {"epochs": 2, "lr": 0.05, "fisher": "diagonal"},
        "rounds": {"rounds": 2, "clients_per_round": 4},
    }
    compute = {"time_model": "device", "seconds_per_sample_epoch": 0.02}
    return small_scenario(trace, fed, compute=compute, duration=200.0, **over)


@pytest.fixture(scope="module")
def churn_run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("churn")
    run = run_scenario(churn_scenario(churn_trace(tmp)), out=tmp / "runs", progress=False, say=lambda s: None)
    return run.path


def copy_of(run: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(run, out)
    (out / "certificate.json").unlink(missing_ok=True)
    return out


def files_of(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]


def refingerprint(run: Path, name: str) -> None:
    """What a forger does after changing ``name``: the manifest's fingerprint made to match."""
    manifest = json.loads((run / "manifest.json").read_text())
    manifest[FINGERPRINTED[name]] = file_fingerprint(run / name)
    (run / "manifest.json").write_text(json.dumps(manifest, indent=2))


def certify(run: Path, capsys) -> tuple[int, str, dict[str, Any]]:
    rc = main(["certify", str(run)])
    out = capsys.readouterr()
    cert = json.loads((run / "certificate.json").read_text()) if (run / "certificate.json").is_file() else {}
    return rc, out.out + out.err, cert


def a_triggered_record(run: Path, method: str = "fsosa") -> tuple[int, dict[str, Any]]:
    """(its place among the method's records, the record) of a released model with two members or more,
    whose model no other record of any method released."""
    digests = [e["model_sha256"] for e in read_index(run)]
    entries = {(e["method"], e["record"]): e for e in read_index(run)}
    mine = [r for r in records(run) if r["method"] == method]
    for k, r in enumerate(mine):
        e = entries.get((method, k))
        if e and len(r["members"]) >= 2 and digests.count(e["model_sha256"]) == 1:
            return k, r
    raise AssertionError(f"no record of {method} released a model of its own")


def test_a_run_with_churn_certifies(churn_run, tmp_path, capsys):
    rows = records(churn_run)
    # the traffic churns: uploads that failed were taken out, cells emptied and models were withdrawn
    assert any(r.get("take_outs") for r in rows) and any(r.get("not_arrived") for r in rows)
    assert any(r["kind"] == "suspend" for r in rows) and any(r["kind"] == "remove" for r in rows)
    run = copy_of(churn_run, tmp_path)
    rc, out, cert = certify(run, capsys)
    assert rc == 0 and "certified" in out, out
    assert cert["passed"] and cert["tolerance"] == 1e-5 and cert["tool"]["vmc_sim"] and cert["compared"] == "values"
    assert set(cert["seeds"]["subset"]) >= {f"subset/{m!r}" for m in METHODS}
    assert [r["method"] for r in cert["records"]] == [m for m in METHODS for r in rows if r["method"] == m]
    store = json.loads((run / "contributions" / "index.json").read_text())
    stored = {e["meta"]["client"]: e["sha256"] for e in store.values()}
    for r in cert["records"]:
        if r["result"] == "pass":
            assert r["max_abs_diff"] <= 1e-5 and r["model_sha256"]
            if r["method"] != "federaser":  # the merges read every member's contribution
                assert r["contributions"] == {c: stored[repr(c)] for c in r["members"]}
    methods = cert["methods"]
    assert methods["fsosa"]["exactness"] == "distribution" and methods["fedavg"]["exactness"] == "exact"
    assert all(methods[m]["passed"] == methods[m]["models"] > 0 for m in ("fsosa", "retrain", "fedavg"))
    assert methods["fsosa"]["withdrawn"] > 0 and methods["fsosa"]["max_abs_diff"] < 1e-6
    # FedEraser claims no exactness: its distance to retraining (multi-round FedAvg on its clients) is reported
    assert methods["federaser"]["reference"] == "retrain_fedavg" and methods["federaser"]["passed"] == 0
    assert methods["federaser"]["distances"] == methods["federaser"]["models"] > 0
    assert methods["federaser"]["max_abs_diff"] > 1e-3
    text = " ".join(cert["not_covered"])
    assert "tests/test_sampler.py" in text and "tests/test_arrival.py" in text
    departed = {c for r in cert["records"] if r["method"] == "fsosa" for c in r["departed"]}
    assert departed  # every departure is listed, and none is a member of a model released after it
    assert all(r["result"] in ("pass", "unchanged", "withdrawn") for r in cert["records"] if r["method"] == "fsosa")


def test_a_released_model_changed_by_one_value_fails_naming_the_record(churn_run, tmp_path, capsys):
    run = copy_of(churn_run, tmp_path)
    k, _ = a_triggered_record(run)
    entry = next(e for e in read_index(run) if e["method"] == "fsosa" and e["record"] == k)
    path = run / "released" / entry["file"]
    weights = load_file(str(path))["weights"].clone()
    weights[7] += 1e-3
    save_file({"weights": weights}, str(path))
    rc, out, cert = certify(run, capsys)
    assert rc == 1 and f"FAILED fsosa record {k} " in out and "failed verification" in out, out
    assert not cert["passed"]
    # a forger who also rewrites the index and the manifest's fingerprint: the values still differ
    path.unlink()
    digest = model_digest(weights)
    save_file({"weights": weights}, str(run / "released" / file_name(digest)))
    lines = []
    for line in (run / "released.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e["method"] == "fsosa" and e["record"] == k:
            e.update(model_sha256=digest, file=file_name(digest))
        lines.append(json.dumps(e))
    (run / "released.jsonl").write_text("\n".join(lines) + "\n")
    refingerprint(run, "released.jsonl")
    rc, out, cert = certify(run, capsys)
    failed = [r for r in cert["records"] if r["result"] == "fail"]
    assert rc == 1 and [r["record"] for r in failed] == [k] and not cert["input_problems"], out
    assert f"FAILED fsosa record {k} " in out and "differs from a fresh fit" in out
    assert failed[0]["max_abs_diff"] == pytest.approx(1e-3, rel=1e-3)


def test_a_contribution_swapped_for_another_clients_fails_naming_the_record(churn_run, tmp_path, capsys):
    run = copy_of(churn_run, tmp_path)
    k, row = a_triggered_record(run)
    victim = row["members"][0]
    index_path = run / "contributions" / "index.json"
    index = json.loads(index_path.read_text())
    by_client = {e["meta"]["client"]: name for name, e in index.items()}
    other = next(c for c in by_client if c != repr(victim))
    mine, theirs = run / "contributions" / by_client[repr(victim)], run / "contributions" / by_client[other]
    mine.write_bytes(theirs.read_bytes())
    rc, out, _ = certify(run, capsys)
    assert rc == 1 and f"FAILED fsosa record {k} " in out and repr(victim) in out, out
    # the forger makes the store's index (and the manifest) vouch for the swapped file as the victim's:
    # every contribution verifies, and the released models still differ from a refit on the victim's own
    index[by_client[repr(victim)]]["sha256"] = hashlib.sha256(mine.read_bytes()).hexdigest()
    index_path.write_text(json.dumps(index, sort_keys=True))
    refingerprint(run, "contributions/index.json")
    rc, out, cert = certify(run, capsys)
    failed = {(r["method"], r["record"]) for r in cert["records"] if r["result"] == "fail"}
    assert rc == 1 and ("fsosa", k) in failed and "differs from a fresh fit" in out, out
    assert not cert["input_problems"]
    assert all(victim in r["members"] for r in cert["records"] if (r["method"], r["record"]) in failed)


def test_an_edited_member_list_fails_naming_the_record(churn_run, tmp_path, capsys):
    run = copy_of(churn_run, tmp_path)
    k, row = a_triggered_record(run)
    rows = records(run)
    clients = {c for r in rows for c in r["members"]}
    stranger = sorted(clients - set(row["members"]))[0]
    n = 0
    for r in rows:
        if r["method"] == "fsosa":
            if n == k:
                r["members"] = sorted([stranger, *r["members"][1:]])
            n += 1
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rc, out, cert = certify(run, capsys)
    assert rc == 1 and "records.jsonl" in out and f"FAILED fsosa record {k} " in out, out
    assert cert["input_problems"] and not cert["inputs"]["records.jsonl"]["verified"]
    refingerprint(run, "records.jsonl")  # the forger's manifest: the record is still named
    rc, out, cert = certify(run, capsys)
    assert rc == 1 and not cert["input_problems"] and f"FAILED fsosa record {k} " in out, out


def test_certify_is_refused_while_another_process_holds_the_lock_and_changes_only_its_certificate(
    churn_run, tmp_path, capsys
):
    run = copy_of(churn_run, tmp_path)
    before = files_of(run)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from vmc_sim.rundir.lock import RunLock; lock = RunLock(sys.argv[1]); "
            "print('held', flush=True); time.sleep(60)",
            str(run),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert writer_alive(run) is not None
        rc = main(["certify", str(run)])
        err = capsys.readouterr().err
        assert rc == 2 and "another process is writing" in err and f"pid {holder.pid}" in err, err
        assert files_of(run) == {**before, ".lock": files_of(run)[".lock"]}  # only the holder wrote its lock
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 10
    while writer_alive(run) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    (run / ".lock").write_bytes(before[".lock"])  # the killed holder could not empty it
    assert main(["certify", str(run)]) == 0
    after = files_of(run)
    assert set(after) - set(before) == {"certificate.json"}
    assert {k: v for k, v in after.items() if k != "certificate.json"} == before


def test_a_run_that_keeps_only_digests_certifies_by_digest(tmp_path, capsys):
    # Retrain refits from scratch, so its released models are bit for bit a fresh fit's; F-SOSA's edits
    # sum their statistics incrementally and may differ in a last bit, which a digest cannot tell apart
    sc = churn_scenario(churn_trace(tmp_path), coordinator={"released_models": "digests"})
    sc = sc.model_copy(update={"federated": sc.federated.model_copy(update={"methods": ["retrain", "fsosa"]})})
    run = run_scenario(sc, out=tmp_path / "runs", progress=False, say=lambda s: None).path
    assert not (run / "released").exists() and read_index(run)
    main(["certify", str(run)])
    out = capsys.readouterr().out
    cert = json.loads((run / "certificate.json").read_text())
    assert cert["compared"] == "digests"
    retrain = [r for r in cert["records"] if r["method"] == "retrain"]
    assert all(r["result"] in ("pass", "unchanged", "withdrawn") for r in retrain)
    assert cert["methods"]["retrain"]["passed"] == cert["methods"]["retrain"]["models"] > 0
    for r in cert["records"]:
        if r["result"] == "fail":
            assert r["method"] == "fsosa" and "released_models: all" in " ".join(r["reasons"]), out
    # a difference is measured where the model is kept: the final one in models.safetensors
    measured = [r["max_abs_diff"] for r in retrain if r["max_abs_diff"] is not None]
    models = run / "models.safetensors"
    if models.is_file() and "retrain.weights" in load_file(str(models)):
        assert measured == [0.0]
    else:  # the last model was withdrawn: none is kept
        assert measured == []


def test_a_run_without_kept_models_or_not_complete_is_refused(churn_run, tmp_path, capsys):
    run = copy_of(churn_run, tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["released_file"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert main(["certify", str(run)]) == 1
    assert "run it again to certify it" in capsys.readouterr().err
    manifest["status"] = "interrupted"
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert main(["certify", str(run)]) == 1
    assert "reads completed runs" in capsys.readouterr().err
    assert not (run / "certificate.json").exists()
    assert main(["certify", str(tmp_path / "nothing")]) == 2


def test_a_replayed_selection_is_the_selection_itself(tiny: TinySetup):
    from fl_core.editors import build_editor
    from fl_core.projection import project
    from fl_core.validation import Validator

    pool = tiny.pool(fisher="kfac")
    pool.validator = Validator(tiny.model_fn, tiny.test.subset(list(range(200))))
    editor = build_editor("fedfisher", pool, torch.Generator() and __import__("numpy").random.default_rng(0))
    report = editor.fit(range(6))
    assert report.solve is not None and len(report.solve.candidates) > 1
    refit = editor.refit(list(range(6)), report.solve.as_dict())
    assert editor.model is not None and torch.equal(refit, editor.model)
    with pytest.raises(ValueError, match="not a candidate"):
        project(editor.stats, editor.projection, choose=0.5)
