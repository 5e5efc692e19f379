"""Driving one SUMO simulation through libsumo or TraCI.

Finding SUMO is :mod:`mobility.sumo_install`; its configuration :mod:`mobility.sumo_config`
(both re-exported here, the names the rest of the toolkit imports).

:class:`SumoSession` hides the two backends behind one small set of verbs:

* ``libsumo`` (default): SUMO runs inside this Python process. Fastest, but SUMO allows only one
  such simulation per process at a time (a second start raises :class:`SumoError`).
* ``traci``: a ``sumo`` subprocess is launched with ``--remote-port`` on a port that was free on
  127.0.0.1 and the client connects to 127.0.0.1 only. Any number of these may run side by side.

Every failure of the backend (a fatal error inside libsumo, the subprocess exiting or being
killed, the socket closing) becomes a :class:`SumoError` naming the backend, the simulated time,
the exit status and the tail of SUMO's own log.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time as _time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from mobility.errors import SumoError
from mobility.sumo_config import (
    Backend,
    SumoConfig,
    merge_args,
    options_dict,
    parse_args,
)
from mobility.sumo_install import (
    describe_exit,
    log_tail,
    read_tail,
    run_command,
    run_tool,
    sumo_binary,
    sumo_home,
    sumo_tool,
    sumo_version,
    tool_env,
)

VehicleState = tuple[float, float, float]
"""(x, y, speed) of a vehicle: network coordinates in m, speed in m/s."""

_libsumo_owner: SumoSession | None = None


__all__ = [
    "Backend",
    "SumoConfig",
    "SumoSession",
    "VehicleState",
    "free_loopback_port",
    "merge_args",
    "options_dict",
    "parse_args",
    "run_command",
    "run_tool",
    "sumo_binary",
    "sumo_home",
    "sumo_tool",
    "sumo_version",
    "tool_env",
]


def free_loopback_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SumoSession:
    """One running SUMO simulation behind a backend-independent API.

    Typical use::

        with SumoSession(SumoConfig(net_file=..., route_files=[...])) as s:
            s.add_poi("rsu0", 500.0, 500.0)
            s.subscribe_context("rsu0", 150.0)
            while not s.finished:
                s.step()
                nearby = s.context_states("rsu0")

    All getters read subscriptions or single per-step queries; none loops over vehicles.
    """

    def __init__(self, config: SumoConfig) -> None:
        config.validate()
        self.config = config
        self.backend = Backend(config.backend)
        self._api: Any = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None
        self._error_log: Path | None = None
        self._time = float(config.begin or 0.0)
        self._end: float | None = config.end
        self._open = False
        self._dead = False
        self._track_all = False
        self._teleports = 0
        self._step_teleports: tuple[str, ...] = ()
        self._arrived: tuple[str, ...] = ()
        self._departed: tuple[str, ...] = ()

    # -- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> SumoSession:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def time(self) -> float:
        """Current simulated time in seconds."""
        return self._time

    @property
    def end(self) -> float | None:
        """Simulated time at which this simulation stops (config end or the .sumocfg's end)."""
        return self._end

    @property
    def teleports(self) -> int:
        """Number of teleports started since the beginning of the run."""
        return self._teleports

    @property
    def workdir(self) -> Path | None:
        """Directory holding SUMO's logs for this simulation (kept after a failure)."""
        return self._workdir

    @property
    def pid(self) -> int | None:
        """Process id of the SUMO subprocess (traci backend), else None."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Launch SUMO; raises SumoError if it cannot start (bad input, port clash, missing files)."""
        global _libsumo_owner
        if self._open:
            raise SumoError("this SumoSession is already running")
        self._check_inputs()
        if self.backend is Backend.LIBSUMO and _libsumo_owner is not None:
            raise SumoError(
                "libsumo allows one simulation per process and one is already running here; "
                "close it first, or use backend 'traci', or run in another process"
            )
        self._workdir = Path(tempfile.mkdtemp(prefix="vmc-sumo-"))
        args = self.config.arguments()
        given = options_dict(args).get("error-log")
        self._error_log = Path(given) if given else self._workdir / "sumo-errors.log"
        if not given:
            args += ["--error-log", str(self._error_log)]
        try:
            if self.backend is Backend.LIBSUMO:
                try:
                    import libsumo
                except ImportError as exc:
                    raise SumoError(f"backend 'libsumo' needs the libsumo wheel: {exc}") from exc
                try:
                    libsumo.start([str(sumo_binary("sumo")), *args])
                except Exception as exc:  # libsumo raises its own TraCIException/FatalTraCIError
                    self._safe_libsumo_close(libsumo)
                    raise SumoError(f"SUMO (libsumo) failed to start: {exc}\n{self._log_tail()}") from exc
                _libsumo_owner = self
                self._api = libsumo
            else:
                self._api = self._start_traci(args)
        except BaseException:
            if not self._log_text().strip():
                shutil.rmtree(self._workdir, ignore_errors=True)
            raise
        self._open = True
        self._time = float(self._call("simulation.getTime", lambda: self._api.simulation.getTime()))
        sim_end = float(self._call("simulation.getEndTime", lambda: self._api.simulation.getEndTime()))
        if sim_end > 0:
            self._end = sim_end if self._end is None else min(self._end, sim_end)

    def _check_inputs(self) -> None:
        c = self.config
        if c.config_file is None and c.net_file is None:
            raise SumoError("sumo.config_file or sumo.net_file must be given")
        named = [("sumo.config_file", c.config_file), ("sumo.net_file", c.net_file)]
        named += [(f"sumo.route_files[{i}]", p) for i, p in enumerate(c.route_files)]
        named += [(f"sumo.additional_files[{i}]", p) for i, p in enumerate(c.additional_files)]
        for name, path in named:
            if path is not None and not Path(path).is_file():
                raise SumoError(f"{name} does not exist: {path}")

    def _start_traci(self, args: list[str]) -> Any:
        try:
            from traci.connection import Connection
        except ImportError as exc:
            raise SumoError(f"backend 'traci' needs the traci wheel: {exc}") from exc
        assert self._workdir is not None
        binary = str(sumo_binary("sumo"))
        for attempt in range(3):
            port = free_loopback_port()
            with open(self._workdir / "sumo-output.log", "wb") as log:
                self._proc = subprocess.Popen(
                    [binary, *args, "--remote-port", str(port)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=tool_env(),
                )
            deadline = _time.monotonic() + self.config.connect_timeout
            while True:
                code = self._proc.poll()
                if code is not None:
                    break
                try:
                    con = Connection("127.0.0.1", port, self._proc, None, False, None)
                    con.getVersion()
                    return con
                except OSError:
                    if _time.monotonic() > deadline:
                        self._kill_proc()
                        raise SumoError(
                            f"SUMO (traci, pid {self._proc.pid}) did not accept a connection on 127.0.0.1:{port} "
                            f"within sumo.connect_timeout={self.config.connect_timeout} s\n{self._log_tail()}"
                        ) from None
                    _time.sleep(0.05)
            log_text = self._log_text()
            if "in use" in log_text.lower() and attempt < 2:
                continue
            raise SumoError(f"SUMO (traci) exited during start-up with {describe_exit(code)}\n{self._log_tail()}")
        raise SumoError("SUMO (traci) could not bind a TraCI port after 3 attempts")

    def close(self) -> None:
        """End the simulation and release the backend; safe to call twice or after a failure."""
        global _libsumo_owner
        if self._api is None:
            return
        api, self._api = self._api, None
        was_open, self._open = self._open, False
        if self.backend is Backend.LIBSUMO:
            if was_open or _libsumo_owner is self:
                self._safe_libsumo_close(api)
            if _libsumo_owner is self:
                _libsumo_owner = None
        else:
            if was_open:
                with contextlib.suppress(Exception):  # the connection may already be gone; the process is reaped below
                    api.close(wait=False)
            if self._proc is not None:
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._kill_proc()
        if self._workdir is not None and (not self._dead or not self._log_text().strip()):
            shutil.rmtree(self._workdir, ignore_errors=True)

    @staticmethod
    def _safe_libsumo_close(libsumo: Any) -> None:
        with contextlib.suppress(Exception):  # nothing left to close after a failed start or a fatal error
            libsumo.close()

    def _kill_proc(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    # -- error handling ------------------------------------------------------------------

    def _log_text(self) -> str:
        chunks = []
        if self._workdir is not None:
            for p in (self._error_log, self._workdir / "sumo-output.log"):
                if p is not None and p.is_file():
                    chunks.append(read_tail(p))
        return "\n".join(chunks)

    def _log_tail(self) -> str:
        tail = log_tail(self._log_text())
        if not tail:
            return "  SUMO wrote no log"
        where = f" (kept in {self._workdir})" if self._workdir is not None else ""
        return f"  SUMO log{where}:\n{tail}"

    def call(self, what: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn()`` (which uses :attr:`raw`) with backend failures translated into SumoError."""
        return self._call(what, fn)

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        if not self._open:
            raise SumoError(f"SUMO session is not running (cannot call {what}); start() it first")
        try:
            return fn()
        except Exception as exc:
            if not self._is_backend_error(exc):
                raise
            raise self._failure(what, exc) from exc

    def _is_backend_error(self, exc: Exception) -> bool:
        if isinstance(exc, OSError):
            return True
        module = type(exc).__module__ or ""
        return (
            module.startswith("traci")
            or module.startswith("libsumo")
            or type(exc).__name__ in ("TraCIException", "FatalTraCIError")
        )

    def _failure(self, what: str, exc: Exception) -> SumoError:
        fatal = type(exc).__name__ == "FatalTraCIError" or isinstance(exc, OSError)
        exit_info = ""
        if self.backend is Backend.TRACI and self._proc is not None:
            try:
                code = self._proc.wait(timeout=5) if fatal else self._proc.poll()
            except subprocess.TimeoutExpired:
                code = None
            if code is not None:
                fatal = True
                exit_info = f"; the sumo process (pid {self._proc.pid}) ended with {describe_exit(code)}"
        elif self.backend is Backend.LIBSUMO and "process error" in str(exc).lower():
            fatal = True
        state = "died" if fatal else "refused the call"
        message = (
            f"SUMO ({self.backend.value}) {state} during {what} at simulated time {self._time:g} s: "
            f"{type(exc).__name__}: {exc}{exit_info}\n{self._log_tail()}"
        )
        if fatal:
            self._dead = True
            self.close()
        return SumoError(message)

    # -- stepping ------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        """True once the end time is reached or no vehicle is running or waiting to depart."""
        if not self._open:
            return True
        if self._end is not None and self._time >= self._end - 1e-9:
            return True
        return (
            int(self._call("simulation.getMinExpectedNumber", lambda: self._api.simulation.getMinExpectedNumber())) <= 0
        )

    def step(self) -> float:
        """Advance SUMO by one step; returns the new simulated time (s)."""
        api = self._api

        def _do() -> tuple[float, tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
            api.simulationStep()
            sim = api.simulation
            return (
                float(sim.getTime()),
                tuple(sim.getArrivedIDList()),
                tuple(sim.getDepartedIDList()),
                tuple(sim.getStartingTeleportIDList()),
            )

        self._time, self._arrived, self._departed, self._step_teleports = self._call("simulationStep", _do)
        self._teleports += len(self._step_teleports)
        if self._track_all and self._departed:
            self._subscribe_vehicles(self._departed)
        return self._time

    # -- per-step information ------------------------------------------------------------

    def arrived_ids(self) -> tuple[str, ...]:
        """Vehicles that reached their destination (or were removed) in the last step."""
        return self._arrived

    def departed_ids(self) -> tuple[str, ...]:
        """Vehicles inserted into the network in the last step."""
        return self._departed

    def teleport_ids(self) -> tuple[str, ...]:
        """Vehicles that started a teleport in the last step."""
        return self._step_teleports

    def running_count(self) -> int:
        """Number of vehicles currently in the network."""
        return int(self._call("vehicle.getIDCount", lambda: self._api.vehicle.getIDCount()))

    def vehicle_ids(self) -> tuple[str, ...]:
        """Ids of all vehicles currently in the network."""
        return tuple(self._call("vehicle.getIDList", lambda: self._api.vehicle.getIDList()))

    def vehicle_state(self, vehicle: str) -> VehicleState:
        """(x, y, speed) of one vehicle by direct query (for checks, not for per-step loops)."""

        def _do() -> VehicleState:
            x, y = self._api.vehicle.getPosition(vehicle)
            return float(x), float(y), float(self._api.vehicle.getSpeed(vehicle))

        return self._call(f"vehicle.getPosition({vehicle!r})", _do)

    def track_all_vehicles(self) -> None:
        """Subscribe position and speed of every vehicle as it departs (see :meth:`vehicle_states`)."""
        if not self._track_all:
            self._track_all = True
            self._subscribe_vehicles(self.vehicle_ids())

    def _subscribe_vehicles(self, ids: Iterable[str]) -> None:
        from traci import constants as tc

        def _do() -> None:
            for vid in ids:
                self._api.vehicle.subscribe(vid, [tc.VAR_POSITION, tc.VAR_SPEED])

        self._call("vehicle.subscribe", _do)

    def vehicle_states(self) -> dict[str, VehicleState]:
        """(x, y, speed) of all running vehicles from per-vehicle subscriptions (needs :meth:`track_all_vehicles`)."""
        if not self._track_all:
            raise SumoError("vehicle_states() needs track_all_vehicles() to be called first")
        from traci import constants as tc

        raw = self._call("vehicle.getAllSubscriptionResults", lambda: self._api.vehicle.getAllSubscriptionResults())
        return _states(raw, tc)

    def add_poi(self, poi_id: str, x: float, y: float) -> None:
        """Place an invisible point of interest (used as the centre of a context subscription)."""
        self._call(
            f"poi.add({poi_id!r})", lambda: self._api.poi.add(poi_id, float(x), float(y), (255, 0, 0, 255), "vmc-rsu")
        )

    def subscribe_context(self, poi_id: str, radius: float) -> None:
        """Subscribe position and speed of every vehicle within ``radius`` m of a POI, every step."""
        from traci import constants as tc

        self._call(
            f"poi.subscribeContext({poi_id!r})",
            lambda: self._api.poi.subscribeContext(
                poi_id, tc.CMD_GET_VEHICLE_VARIABLE, float(radius), [tc.VAR_POSITION, tc.VAR_SPEED]
            ),
        )

    def context_states(self, poi_id: str) -> dict[str, VehicleState]:
        """(x, y, speed) of the vehicles SUMO reports in a POI's context this step."""
        from traci import constants as tc

        raw = self._call(
            f"poi.getContextSubscriptionResults({poi_id!r})",
            lambda: self._api.poi.getContextSubscriptionResults(poi_id),
        )
        return _states(raw, tc)

    @property
    def raw(self) -> Any:
        """The backend object (the libsumo module or a traci Connection) for anything not wrapped here.

        Calls made through it are not translated into SumoError.
        """
        return self._api


def _states(raw: Any, tc: Any) -> dict[str, VehicleState]:
    out: dict[str, VehicleState] = {}
    if not raw:
        return out
    for vid, values in raw.items():
        pos = values.get(tc.VAR_POSITION)
        if pos is None:
            continue
        out[vid] = (float(pos[0]), float(pos[1]), float(values.get(tc.VAR_SPEED, 0.0)))
    return out
