"""``flwr run`` of the packaged Flower app (``examples/flower_app``) against a SuperLink started
and stopped here: Flower's way to run a simulation since ``run_simulation`` was deprecated (1.42).

``flwr run`` submits the app to a SuperLink (the CLI's own "local" connection starts one that keeps
running in the background); here a SuperLink in simulation mode is started on two free local ports
with its own Flower home (``FLWR_HOME``: its configuration, the installed app, the logs), the app is
run with ``--stream`` until it finishes, and the SuperLink (with the processes it started) is
stopped. Offline, the SuperLink must not install the app's dependencies (by default it runs ``uv
sync`` for every run): ``FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1`` is set, so the app runs in
this Python environment, where vmc-sim is installed; ``FLWR_DISABLE_UPDATE_CHECK=1`` skips the
version check. Needs no Flower import, only its commands (``flwr``, ``flower-superlink``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

APP = Path(__file__).resolve().parents[2] / "examples" / "flower_app"
"""The Flower app of a source checkout (``flwr run`` needs its directory, with its pyproject.toml)."""
CONNECTION = "vmc"
OFFLINE_ENV = {"FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1", "FLWR_DISABLE_UPDATE_CHECK": "1"}
STARTUP_S = 60.0


@dataclass(frozen=True)
class FlwrRun:
    """How one ``flwr run`` went: its exit status, its output (the streamed logs) and its seconds."""

    returncode: int
    output: str
    wall_s: float


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def toml_value(value: Any) -> str:
    """``value`` as a TOML value (string, boolean, integer or float)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))  # a JSON string is a TOML basic string


def write_run_config(path: Path, config: Mapping[str, Any]) -> Path:
    """``config`` as a TOML file of run-config overrides (``flwr run --run-config FILE.toml``)."""
    path.write_text("".join(f"{k} = {toml_value(v)}\n" for k, v in config.items()), encoding="utf-8")
    return path


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=0.5) as r:
            return 200 <= r.status < 300
    except (urllib.error.URLError, OSError):
        return False


def _stop(process: subprocess.Popen) -> None:
    """Stop the SuperLink and what it started (its process group, made for it)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=20)


def run_app(
    run_config: Mapping[str, Any],
    num_supernodes: int,
    home: Path,
    app: Path = APP,
    timeout: float = 3600.0,
    say: Callable[[str], None] = print,
    cpus_per_node: int = 1,
) -> FlwrRun:
    """``flwr run app`` with ``run_config`` on ``num_supernodes`` simulated SuperNodes (each running
    node reserving ``cpus_per_node``), through a SuperLink whose Flower home is ``home``; returns
    when the run has finished."""
    if not (app / "pyproject.toml").is_file():
        raise FileNotFoundError(f"{app}: no Flower app here (no pyproject.toml)")
    if isinstance(cpus_per_node, bool) or not isinstance(cpus_per_node, int) or cpus_per_node < 1:
        raise ValueError(
            f"cpus_per_node must be a whole number of CPUs (flwr run's federation config), got {cpus_per_node!r}"
        )
    home.mkdir(parents=True, exist_ok=True)
    http, control = free_port(), free_port()
    env = {**os.environ, "FLWR_HOME": str(home), **OFFLINE_ENV}
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "{CONNECTION}"\n\n[superlink.{CONNECTION}]\n'
        f'address = "127.0.0.1:{http}"\ninsecure = true\n',
        encoding="utf-8",
    )
    overrides = write_run_config(home / "run_config.toml", run_config)
    link_cmd = ["flower-superlink", "--insecure", "--simulation", "--isolation", "subprocess"]
    link_cmd += ["--control-api-address", f"127.0.0.1:{control}", "--host", "127.0.0.1", "--port", str(http)]
    link_cmd += ["--log-file", str(home / "superlink.log"), "--disable-runtime-dependency-installation"]
    t0 = time.perf_counter()
    link = subprocess.Popen(
        link_cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + STARTUP_S
        while not _healthy(http):
            if link.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"flower-superlink did not start (see {home / 'superlink.log'})")
            time.sleep(0.2)
        say(f"SuperLink on 127.0.0.1:{http} (Flower home {home}); flwr run {app} on {num_supernodes} SuperNodes")
        cmd = ["flwr", "run", str(app), CONNECTION, "--stream", "--run-config", str(overrides)]
        cmd += ["--federation-config", f"num-supernodes={num_supernodes} client-resources-num-cpus={cpus_per_node}"]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    finally:
        _stop(link)
    return FlwrRun(done.returncode, done.stdout + done.stderr, time.perf_counter() - t0)
