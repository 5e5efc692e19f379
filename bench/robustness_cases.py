"""Reliability cases of the ``vmc`` command line, each from a user's point of view.

What a user does to a run (resume it while it is written, interrupt it, cut or flip its files,
edit its inputs, feed odd scenario values) and what ``vmc`` answers: every case runs in a fresh
temporary directory through ``python -m vmc_sim.cli`` subprocesses, with ``PYTHONPATH`` set to the
checkout given by ``--repo``, so the same script measures an older checkout and the current one
side by side. It prints one Markdown table (case, command, outcome, whether anything recorded
changed); tiny scenarios keep it within minutes on two cores: ``python bench/robustness_cases.py --repo DIR``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parents[1]

TINY: dict[str, Any] = {
    "name": "tiny",
    "duration": 200,
    "mobility": {"source": "city"},
    "federated": {"dataset": "digits", "model": "mlp", "num_clients": 8, "train": {"epochs": 1}},
    "coordinator": {"max_requests": 6},
}
FAR = {"id": "far", "x": 1e6, "y": 1e6}
SLOW: dict[str, Any] = {
    "name": "slow",
    "duration": 400,
    "mobility": {"source": "city"},
    "federated": {"dataset": "digits", "model": "mlp", "num_clients": 8, "train": {"epochs": 120}},
}  # long in wall time (many local epochs over the whole horizon), so a run can be caught mid-write


@dataclass
class Result:
    """A finished ``vmc`` subprocess."""

    rc: int | None
    out: str
    err: str

    def line(self, first: bool = False) -> str:
        """The line that matters: stderr's last (or first) non-empty line, else stdout's last."""
        for text in (self.err, self.out):
            lines = [s.strip() for s in text.splitlines() if s.strip()]
            if lines:
                return lines[0] if first else lines[-1]
        return ""

    def brief(self, first: bool = False, limit: int = 200) -> str:
        """Exit code and the line that matters, cut to ``limit`` characters."""
        rc = "timed out" if self.rc is None else f"exit {self.rc}"
        line = self.line(first)
        return f"{rc}: {line if len(line) <= limit else line[: limit - 1] + '…'}"


class Vmc:
    """Runs ``python -m vmc_sim.cli`` from one checkout, in a given working directory; paths under
    ``root`` are shown relative to their case's directory."""

    def __init__(self, repo: Path, root: Path) -> None:
        self.env = {**os.environ, "PYTHONPATH": str(repo), "PYTHONUNBUFFERED": "1"}
        self.root = re.compile(re.escape(str(root)) + r"/[^/\s]+/?")

    def start(self, args: list[str], cwd: Path) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "vmc_sim.cli", *args],
            cwd=cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(self, args: list[str], cwd: Path) -> Result:
        return self.shown(finish(self.start(args, cwd)))

    def shown(self, res: Result) -> Result:
        return Result(res.rc, self.root.sub("", res.out), self.root.sub("", res.err))


def finish(proc: subprocess.Popen[str], timeout: float = 180.0) -> Result:
    """Wait for ``proc``; one that runs past ``timeout`` is killed and reported as timed out."""
    try:
        out, err = proc.communicate(timeout=timeout)
        return Result(proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return Result(None, out, err)


def write_yaml(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def merged(base: dict[str, Any], **over: Any) -> dict[str, Any]:
    """``base`` with sections updated one level deep."""
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for k, v in over.items():
        data[k] = {**data.get(k, {}), **v} if isinstance(v, dict) and isinstance(data.get(k), dict) else v
    return data


def run_dir(out: Path) -> Path | None:
    return next(iter(sorted(p for p in out.glob("*") if p.is_dir())), None) if out.is_dir() else None


def count_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.is_file() else 0


def duplicates(path: Path) -> int:
    """Records whose (method, index) pair appears more than once."""
    seen: Counter[tuple[Any, Any]] = Counter()
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            seen[tuple(json.loads(line)[k] for k in ("method", "index"))] += 1
        except (ValueError, KeyError, TypeError):
            continue
    return sum(n - 1 for n in seen.values() if n > 1)


def kept_or_changed(records: Path, before: bytes) -> str:
    """Whether the records written before a resume are still the file's first bytes."""
    return "records written before kept" if records.read_bytes().startswith(before) else "records changed"


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file of a run directory but its lock file (the writer's pid, not a record)."""
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file() and p.name != ".lock"
    }


def changes(before: dict[str, bytes], after: dict[str, bytes]) -> str:
    """What became of the files recorded before: changed or gone, and what was added beside."""
    changed = [k for k in before if k in after and after[k] != before[k]]
    gone = [k for k in before if k not in after]
    added = [k for k in after if k not in before]
    parts = [f"changed: {', '.join(changed)}"] if changed else []
    parts += [f"removed: {', '.join(gone)}"] if gone else []
    text = "; ".join(parts) if parts else "nothing recorded changed"
    more = f" and {len(added) - 3} more" if len(added) > 3 else ""
    return text + (f" (added {', '.join(added[:3])}{more})" if added else "")


def wait_for_records(proc: subprocess.Popen[str], out: Path, lines: int, timeout: float = 120.0) -> Path | None:
    """The run directory once its records.jsonl holds ``lines`` lines, or None if the run ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        path = run_dir(out)
        if path is not None and count_lines(path / "records.jsonl") >= lines:
            return path
        time.sleep(0.05)
    return None


def row_figures(stdout: str, method: str = "fsosa") -> dict[str, str]:
    """Requests, withdrawals and final accuracy of ``method`` in ``vmc run``'s summary table."""
    lines = stdout.splitlines()
    header = next((s for s in lines if s.startswith("method ") and "requests" in s), "")
    row = next((s for s in lines if s.split()[:1] == [method] and header and len(s) >= len(header) - 12), "")
    found: dict[str, str] = {}
    for label in ("requests", "withdrawn", "final acc %"):
        at = header.find(label)
        hit = [m.group() for m in re.finditer(r"\S+", row) if at >= 0 and m.start() < at + len(label) and m.end() > at]
        if hit:
            found[label] = hit[-1]
    return found


def figures(found: dict[str, str]) -> str:
    """Requests, withdrawals and final accuracy cell of a summary row."""
    shown = found.get("withdrawn", "not shown")
    return f"requests {found.get('requests', '?')}, withdrawn {shown}, final acc {found.get('final acc %', '?')!r}"


def markdown_row(stdout: str, method: str) -> dict[str, str]:
    """The cells of ``method``'s row in the Markdown table a sweep prints, by column name."""
    split = [[c.strip() for c in s.strip().strip("|").split("|")] for s in stdout.splitlines() if s.startswith("|")]
    head = next((c for c in split if "method" in c and "requests" in c), [])
    row = next((c for c in split if head and len(c) == len(head) and c[head.index("method")] == method), [])
    return dict(zip(head, row, strict=False))


def cell(text: str, limit: int = 260) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Cases:
    """Every case, each in its own temporary directory under ``root``."""

    def __init__(self, repo: Path, root: Path) -> None:
        self.repo, self.root, self.vmc = repo, root, Vmc(repo, root)
        self._reference: int | None = None
        self._done: Path | None = None

    def start(self, tmp: Path, data: dict[str, Any] = SLOW) -> subprocess.Popen[str]:
        """``vmc run`` of ``data`` written to ``tmp``, into ``tmp/runs``."""
        return self.vmc.start(["run", str(write_yaml(tmp / "scenario.yaml", data)), "--out", "runs", "--quiet"], tmp)

    def fresh(self, name: str) -> Path:
        return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.root))

    def reference(self) -> int:
        """Records of the slow scenario run once without interruption."""
        if self._reference is None:
            tmp = self.fresh("reference")
            finish(self.start(tmp))
            self._reference = count_lines((run_dir(tmp / "runs") or tmp) / "records.jsonl")
        return self._reference

    def completed(self, into: Path) -> Path:
        """A copy, under ``into``, of one completed tiny run (made once)."""
        if self._done is None:
            tmp = self.fresh("completed")
            finish(self.start(tmp, TINY))
            self._done = run_dir(tmp / "runs")
            if self._done is None:
                raise RuntimeError("the tiny scenario did not complete")
        return Path(shutil.copytree(self._done, into / "run"))

    def interrupted(self, tmp: Path, sig: signal.Signals, lines: int = 20) -> tuple[Path | None, Result]:
        """A slow run stopped by ``sig`` once it wrote ``lines`` records."""
        proc = self.start(tmp)
        path = wait_for_records(proc, tmp / "runs", lines)
        if path is not None:
            proc.send_signal(sig)
        return path, finish(proc)

    def resume_while_written(self) -> tuple[str, str]:
        tmp = self.fresh("c01")
        proc = self.start(tmp)
        path = wait_for_records(proc, tmp / "runs", 1)
        if path is None:
            return f"the run ended before it wrote a record ({finish(proc).brief()})", "-"
        before = (path / "records.jsonl").read_bytes()
        second = self.vmc.run(["run", "--resume", str(path), "--quiet"], tmp)
        first = finish(proc)
        records = path / "records.jsonl"
        kept = kept_or_changed(records, before)
        return (
            f"resume {second.brief(first=True, limit=150)}; the live run exit {first.rc}; records "
            f"{count_lines(records)} vs {self.reference()} uninterrupted, {duplicates(records)} duplicated",
            kept,
        )

    def two_resumes(self) -> tuple[str, str]:
        tmp = self.fresh("c02")
        path, _ = self.interrupted(tmp, signal.SIGKILL)
        if path is None:
            return "the run ended before it was killed", "-"
        before = (path / "records.jsonl").read_bytes()
        procs = [self.vmc.start(["run", "--resume", str(path), "--quiet"], tmp) for _ in range(2)]
        a, b = (self.vmc.shown(finish(p)) for p in procs)
        records = path / "records.jsonl"
        kept = kept_or_changed(records, before)
        return (
            f"A {a.brief(limit=110) if a.rc else 'exit 0'}; B {b.brief(limit=110) if b.rc else 'exit 0'}; "
            f"{duplicates(records)} duplicated (method, index) pairs; "
            f"records {count_lines(records)} vs {self.reference()} uninterrupted",
            kept,
        )

    def sigterm(self) -> tuple[str, str]:
        tmp = self.fresh("c03")
        path, res = self.interrupted(tmp, signal.SIGTERM)
        res = self.vmc.shown(res)
        if path is None:
            return f"the run ended before the signal ({res.brief()})", "-"
        status = json.loads((path / "manifest.json").read_text()).get("status")
        return f"{res.brief()}; manifest status {status!r}", "-"

    def cut_records(self) -> tuple[str, str]:
        tmp = self.fresh("c04")
        path = self.completed(tmp)
        records = path / "records.jsonl"
        data = records.read_bytes()
        records.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 1])
        before = snapshot(path)
        plot = self.vmc.run(["plot", str(path), "--out", str(tmp / "fig.png")], tmp)
        audit = self.vmc.run(["audit", str(path)], tmp)
        return (
            f"plot {plot.brief(limit=110)}; audit {audit.brief(limit=110)}",
            changes(before, snapshot(path)) + ("; fig.png written" if (tmp / "fig.png").exists() else ""),
        )

    def flipped_model(self) -> tuple[str, str]:
        tmp = self.fresh("c05")
        path = self.completed(tmp)
        models = path / "models.safetensors"
        data = bytearray(models.read_bytes())
        data[-3] ^= 0x01
        models.write_bytes(bytes(data))
        before = snapshot(path)
        audit = self.vmc.run(["audit", str(path)], tmp)
        return audit.brief(), changes(before, snapshot(path))

    def edited_routes(self) -> tuple[str, str]:
        tmp = self.fresh("c06")
        source = self.repo / "scenarios" / "own_network"
        shutil.copytree(source if source.is_dir() else HERE / "scenarios" / "own_network", tmp / "net")
        sc = merged(
            SLOW,
            name="files",
            duration=300,
            mobility={"source": "files", "net_file": "net/town.net.xml", "route_files": ["net/town.rou.xml"]},
        )
        proc = self.start(tmp, sc)
        path = wait_for_records(proc, tmp / "runs", 20)
        if path is None:
            return f"the run ended before it was killed ({finish(proc).brief()})", "-"
        proc.send_signal(signal.SIGKILL)
        finish(proc)
        routes = tmp / "net" / "town.rou.xml"
        routes.write_text(routes.read_text().replace('id="veh1" depart="2.00"', 'id="veh1" depart="3.00"', 1))
        before = snapshot(path)
        res = self.vmc.run(["run", "--resume", str(path), "--quiet"], tmp)
        said = f"exit 0: resumed, {count_lines(path / 'records.jsonl')} records" if res.rc == 0 else res.brief(True)
        return said, changes(before, snapshot(path))

    def resume_complete(self) -> tuple[str, str]:
        tmp = self.fresh("c07")
        path = self.completed(tmp)
        before = snapshot(path)
        res = self.vmc.run(["run", "--resume", str(path), "--quiet"], tmp)
        said = next((s for s in res.out.splitlines() if s.strip()), "") if res.rc == 0 else ""
        return f"exit {res.rc}: {said or res.line()}", changes(before, snapshot(path))

    def killed_totals(self) -> tuple[str, str]:
        tmp = self.fresh("c08")
        path, _ = self.interrupted(tmp, signal.SIGKILL)
        if path is None:
            return "the run ended before it was killed", "-"
        before = (path / "records.jsonl").read_bytes()
        res = self.vmc.run(["run", "--resume", str(path), "--quiet"], tmp)
        manifest = json.loads((path / "manifest.json").read_text())
        summary = (manifest.get("summary") or {}).get("records")
        records = path / "records.jsonl"
        kept = kept_or_changed(records, before)
        return (
            f"resume exit {res.rc}; summary.records {summary} vs {count_lines(records)} lines "
            f"({self.reference()} uninterrupted)",
            kept,
        )

    def sweep_relative_config(self) -> tuple[str, str]:
        tmp = self.fresh("c09")
        source = self.repo / "scenarios" / "own_network"
        shutil.copytree(source if source.is_dir() else HERE / "scenarios" / "own_network", tmp / "inputs")
        (tmp / "inputs" / "x.sumocfg").write_text((tmp / "inputs" / "town.sumocfg").read_text())
        base = merged(TINY, name="base", duration=150, mobility={"source": "files", "config_file": "../x.sumocfg"})
        base["coordinator"] = {"max_requests": 4}
        write_yaml(tmp / "inputs" / "scen" / "base.yaml", base)
        sweep = {"name": "rel", "base": "../inputs/scen/base.yaml", "grid": {"rho": [0.3, 0.5]}, "workers": 1}
        path = write_yaml(tmp / "sweeps" / "sweep.yaml", sweep)
        (tmp / "work").mkdir()
        dry = self.vmc.run(["sweep", str(path), "--dry-run"], tmp / "work")
        real = self.vmc.run(["sweep", str(path), "--out", "out"], tmp / "work")
        points: dict[str, str] = {}
        for r in read_results(tmp / "work" / "out"):
            if r.get("status") != "complete" or r.get("point") not in points:
                points[r.get("point", "?")] = r.get("status", "?") + (f" ({r['error']})" if r.get("error") else "")
        done = sum(v == "complete" for v in points.values())
        failure = next((v for v in points.values() if v != "complete"), "")
        ran = f"sweep exit {real.rc}: {done} of {len(points)} points complete" + (f"; {failure}" if failure else "")
        return f"dry-run {dry.brief(limit=120)}; {ran if points else 'sweep ' + real.brief(limit=120)}", "-"

    def sweep_vs_run_withdrawn(self) -> tuple[str, str]:
        tmp = self.fresh("c10")
        trace = emptying_trace(tmp / "trace.jsonl")
        sc = merged(
            TINY,
            name="t",
            duration=120.0,
            mobility={"source": "trace", "trace": str(trace)},
            coordinator={"warmup": 5.0, "min_clients": 4},
        )
        scenario = write_yaml(tmp / "sc.yaml", sc)
        run = self.vmc.run(["run", str(scenario), "--out", "runs"], tmp)
        mine = row_figures(run.out)
        sweep = write_yaml(tmp / "sweep.yaml", {"name": "w", "base": "sc.yaml", "grid": {"rho": [0.5]}, "workers": 1})
        swept = self.vmc.run(["sweep", str(sweep), "--out", "out"], tmp)
        table = markdown_row(swept.out, "fsosa")
        run_text = f"run: {figures(mine)}" if run.rc == 0 else f"run {run.brief()}"
        sweep_text = f"sweep table: {figures(table)}" if swept.rc == 0 else f"sweep {swept.brief()}"
        return f"{run_text}; {sweep_text}", "-"

    def config_case(self, name: str, data: dict[str, Any] | None) -> tuple[str, str]:
        """``vmc run`` of ``data`` (None: an empty file), then whether it left a run directory."""
        tmp = self.fresh(name)
        (tmp / "empty.yaml").write_text("")
        path = write_yaml(tmp / "scenario.yaml", data) if data is not None else tmp / "empty.yaml"
        res = self.vmc.run(["run", str(path), "--out", "runs", "--quiet"], tmp)
        fig = row_figures(res.out)
        left = run_dir(tmp / "runs")
        outcome = f"exit 0: {'fsosa ' + figures(fig) if fig else res.line()}" if res.rc == 0 else res.brief()
        return outcome, (f"run directory left: {left.name}" if left else "no run directory left")

    def all(self) -> list[tuple[str, str, Callable[[], tuple[str, str]]]]:
        far = {"source": "city", "rsus": {"placement": "explicit", "radius": 85, "positions": [FAR]}}
        return [
            ("1 resume while written", "run --resume RUN (writer live)", self.resume_while_written),
            ("2 two resumes together", "run --resume RUN & run --resume RUN", self.two_resumes),
            ("3 SIGTERM", "kill -TERM <vmc run>", self.sigterm),
            ("4 records cut by a line", "plot RUN; audit RUN", self.cut_records),
            ("5 model byte flipped", "audit RUN", self.flipped_model),
            ("6 routes edited after a crash", "run --resume RUN", self.edited_routes),
            ("7 resume a complete run", "run --resume RUN", self.resume_complete),
            ("8 totals after kill + resume", "kill -9; run --resume RUN", self.killed_totals),
            ("9 sweep, base names ../x.sumocfg", "sweep S --dry-run; sweep S", self.sweep_relative_config),
            ("10 sweep vs run, withdrawn model", "run SC; sweep S", self.sweep_vs_run_withdrawn),
            ("11 empty scenario", "run empty.yaml", lambda: self.config_case("c11", None)),
            ("12 train.lr .inf", "run SC", lambda: self.config_case("c12", nonfinite("train.lr"))),
            ("13 duration .inf", "run SC", lambda: self.config_case("c13", nonfinite("duration"))),
            ("14 rho .nan", "run SC", lambda: self.config_case("c14", nonfinite("rho"))),
            ("15 RSU at (1e6, 1e6)", "run SC", lambda: self.config_case("c15", merged(TINY, mobility=far))),
        ]


def nonfinite(key: str) -> dict[str, Any]:
    """The tiny scenario with ``train.lr`` or ``duration`` infinite, or ``rho`` not a number."""
    if key == "train.lr":
        return merged(TINY, federated={"train": {"epochs": 1, "lr": math.inf}})
    return merged(TINY, duration=math.inf) if key == "duration" else merged(TINY, federated={"rho": math.nan})


def read_results(out: Path) -> list[dict[str, str]]:
    found = sorted(out.glob("*/results.csv")) if out.is_dir() else []
    return list(csv.DictReader(found[0].read_text().splitlines())) if found else []


def emptying_trace(path: Path) -> Path:
    """Four vehicles, one arrival, two departures: coverage ends below min_clients (4)."""
    rsu = {"id": "rsu0", "x": 0.0, "y": 0.0, "radius": 300.0}
    meta = {"source": "test", "clock": {"begin": 0.0, "step_length": 1.0}, "rsus": [rsu], "coverage": {}}
    events = [(float(i), "join", f"v{i}", 20.0 * i) for i in range(4)]
    events += [(30.0, "join", "n0", 50.0), (50.0, "leave", "v0", 290.0), (70.0, "leave", "v1", 290.0)]
    lines = [{"type": "header", "format": "vmc-sim-mobility-trace", "version": 1, "meta": meta}]
    lines += [
        {"type": "event", "time": t, "kind": k, "vehicle": v, "rsu": "rsu0", "x": x, "y": 0.0, "speed": 5.0}
        for t, k, v, x in events
    ]
    lines.append({"type": "end", "time": 100.0, "status": "finished", "message": None})
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in lines))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=HERE, help="checkout whose vmc is exercised (default: this one)")
    parser.add_argument("--only", type=int, nargs="*", help="run only these case numbers")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vmc-robustness-") as root:
        cases = Cases(args.repo.resolve(), Path(root))
        print(f"checkout: {cases.repo}\n")
        print("| case | command | outcome | recorded |\n|---|---|---|---|")
        unmeasured = 0
        for name, command, fn in cases.all():
            if args.only and int(name.split()[0]) not in args.only:
                continue
            t0 = time.monotonic()
            try:
                outcome, recorded = fn()
            except Exception as exc:  # a case that cannot be set up is reported, the others go on
                outcome, recorded = f"not measured: {type(exc).__name__}: {exc}", "-"
                unmeasured += 1
            print(f"| {name} | `vmc {command}` | {cell(outcome)} | {cell(recorded)} |", flush=True)
            print(f"case {name.split()[0]}: {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
    print(f"\nwall time: {time.monotonic() - started:.0f} s")
    if unmeasured:
        print(f"{unmeasured} case(s) could not be measured (the table says which)", file=sys.stderr)
    return 1 if unmeasured else 0


if __name__ == "__main__":
    raise SystemExit(main())
