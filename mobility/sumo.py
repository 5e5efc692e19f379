"""Finding SUMO and driving one simulation through libsumo or TraCI.

SUMO comes from the eclipse-sumo / libsumo / traci / sumolib wheels. The binaries (``sumo``,
``netgenerate``, ``netconvert``, ``duarouter``) and the ``tools/`` scripts (``randomTrips.py``)
live inside the eclipse-sumo wheel; a ``SUMO_HOME`` set by the user is honoured when it really
holds the binary asked for, and nothing else (no system install on ``PATH``) is used.

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

import functools
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time as _time
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from mobility.errors import SumoError

VehicleState = tuple[float, float, float]
"""(x, y, speed) of a vehicle: network coordinates in m, speed in m/s."""

_LOG_TAIL_LINES = 15
_libsumo_owner: "SumoSession | None" = None


class Backend(str, Enum):
    """How SUMO is driven."""

    LIBSUMO = "libsumo"
    TRACI = "traci"


# --------------------------------------------------------------------------------------------
# locating SUMO


def _wheel_home() -> Path | None:
    saved = os.environ.get("SUMO_HOME")
    try:
        import sumo as _sumo_wheel
    except ImportError:
        return None
    finally:
        # importing the wheel sets SUMO_HOME when unset; keep the user's environment as it was
        if saved is None:
            os.environ.pop("SUMO_HOME", None)
        else:
            os.environ["SUMO_HOME"] = saved
    return Path(_sumo_wheel.SUMO_HOME)


def _exe(home: Path, name: str) -> Path:
    suffix = ".exe" if sys.platform.startswith("win") else ""
    return home / "bin" / f"{name}{suffix}"


def sumo_home(binary: str = "sumo") -> Path:
    """The SUMO installation to use: ``$SUMO_HOME`` if it holds ``bin/<binary>``, else the wheel.

    Raises SumoError listing the places that were checked.
    """
    checked = []
    user = os.environ.get("SUMO_HOME")
    if user:
        if _exe(Path(user), binary).is_file():
            return Path(user)
        checked.append(f"$SUMO_HOME={user} (no bin/{binary})")
    wheel = _wheel_home()
    if wheel is not None and _exe(wheel, binary).is_file():
        return wheel
    checked.append(
        "the eclipse-sumo wheel (not installed)" if wheel is None else f"the eclipse-sumo wheel at {wheel} (no bin/{binary})"
    )
    raise SumoError(
        f"SUMO binary {binary!r} not found; checked {'; '.join(checked)}. "
        "Install the SUMO wheels: pip install 'eclipse-sumo==1.28.*' 'libsumo==1.28.*' 'traci==1.28.*' 'sumolib==1.28.*'"
    )


def sumo_binary(name: str = "sumo") -> Path:
    """Absolute path of a SUMO binary (``sumo``, ``netgenerate``, ``netconvert``, ``duarouter``)."""
    return _exe(sumo_home(name), name)


def sumo_tool(relative: str) -> Path:
    """Absolute path of a script under SUMO's ``tools/`` (e.g. ``randomTrips.py``)."""
    home = sumo_home()
    path = home / "tools" / relative
    if not path.is_file():
        wheel = _wheel_home()
        if wheel is not None and (wheel / "tools" / relative).is_file():
            return wheel / "tools" / relative
        raise SumoError(f"SUMO tool {relative!r} not found under {home / 'tools'}")
    return path


def sumo_version() -> str:
    """Version string printed by ``sumo --version`` (e.g. ``1.28.0``)."""
    return _sumo_version_of(str(sumo_binary("sumo")))


@functools.lru_cache(maxsize=4)
def _sumo_version_of(binary: str) -> str:
    out = run_command([binary, "--version"], what="sumo --version").stdout
    first = out.splitlines()[0] if out else ""
    return first.rsplit(" ", 1)[-1] if first else "unknown"


def tool_env() -> dict[str, str]:
    """Environment for SUMO subprocesses: ``SUMO_HOME`` pointing at the installation in use."""
    env = dict(os.environ)
    env["SUMO_HOME"] = str(sumo_home())
    if not env.get("PROJ_DATA") and not env.get("PROJ_LIB"):
        proj = Path(env["SUMO_HOME"]) / "data" / "proj"
        if proj.is_dir():
            env["PROJ_DATA"] = env["PROJ_LIB"] = str(proj)
    return env


def _read_tail(path: Path, limit: int = 1 << 16) -> str:
    """The last ``limit`` bytes of a log (a run's warnings can fill megabytes)."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - limit))
        return f.read().decode(errors="replace")


def _tail(text: str, lines: int = _LOG_TAIL_LINES) -> str:
    kept = [ln for ln in text.strip().splitlines() if ln.strip()][-lines:]
    return "\n".join("    " + ln for ln in kept)


def run_command(
    args: Sequence[str], *, what: str, cwd: str | Path | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a SUMO binary or tool, capturing its output; a non-zero exit raises SumoError."""
    try:
        proc = subprocess.run(
            list(args), cwd=cwd, env=tool_env(), capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise SumoError(f"{what} did not finish within {timeout} s: {' '.join(map(str, args))}") from exc
    except OSError as exc:
        raise SumoError(f"{what} could not be started: {exc}") from exc
    if proc.returncode != 0:
        raise SumoError(
            f"{what} failed with {_describe_exit(proc.returncode)}; command: {' '.join(map(str, args))}\n"
            f"{_tail(proc.stderr + proc.stdout)}"
        )
    return proc


def run_tool(script: str, args: Sequence[str], *, what: str, cwd: str | Path | None = None,
             timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """Run a Python script from SUMO's ``tools/`` with this interpreter."""
    return run_command([sys.executable, str(sumo_tool(script)), *map(str, args)], what=what, cwd=cwd, timeout=timeout)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "no exit status (still running)"
    if code < 0:
        try:
            return f"exit status {code} (killed by {signal.Signals(-code).name})"
        except ValueError:
            return f"exit status {code} (killed by signal {-code})"
    return f"exit status {code}"


def free_loopback_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------------------------
# configuration


@dataclass
class SumoConfig:
    """How to run SUMO: backend, inputs, time window and seed (filled from the scenario YAML).

    Give either ``config_file`` (a ``.sumocfg``; the other inputs are then optional additions)
    or ``net_file`` plus ``route_files`` (checked when the session starts, so a scenario can
    leave them to the network builder). ``end=None`` runs until no vehicle is left or expected
    (or until the config file's own end). ``time_to_teleport=None`` keeps SUMO's default (300 s).
    """

    backend: str = Backend.LIBSUMO.value
    config_file: str | None = None
    net_file: str | None = None
    route_files: list[str] = field(default_factory=list)
    additional_files: list[str] = field(default_factory=list)
    step_length: float = 1.0
    seed: int = 42
    begin: float | None = None
    end: float | None = None
    time_to_teleport: float | None = None
    scale: float = 1.0
    extra_args: list[str] = field(default_factory=list)
    connect_timeout: float = 120.0
    verbose: bool = False

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        if isinstance(self.backend, Backend):
            self.backend = self.backend.value
        if self.backend not in {b.value for b in Backend}:
            raise ValueError(f"sumo.backend must be one of {[b.value for b in Backend]}, got {self.backend!r}")
        if isinstance(self.route_files, (str, os.PathLike)):
            self.route_files = [str(self.route_files)]
        if isinstance(self.additional_files, (str, os.PathLike)):
            self.additional_files = [str(self.additional_files)]
        for name in ("route_files", "additional_files", "extra_args"):
            value = getattr(self, name)
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, (str, os.PathLike)) for v in value):
                raise ValueError(f"sumo.{name} must be a list of strings, got {value!r}")
            setattr(self, name, [str(v) for v in value])
        if not _finite(self.step_length) or self.step_length <= 0:
            raise ValueError(f"sumo.step_length must be a positive number of seconds, got {self.step_length!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**31:
            raise ValueError(f"sumo.seed must be an integer in [0, 2^31), got {self.seed!r}")
        if self.begin is not None and (not _finite(self.begin) or self.begin < 0):
            raise ValueError(f"sumo.begin must be a non-negative number of seconds or null, got {self.begin!r}")
        if self.end is not None:
            if not _finite(self.end):
                raise ValueError(f"sumo.end must be a number of seconds or null, got {self.end!r}")
            if self.end <= (self.begin or 0.0):
                raise ValueError(f"sumo.end ({self.end}) must be after sumo.begin ({self.begin or 0.0})")
        if self.time_to_teleport is not None and not _finite(self.time_to_teleport):
            raise ValueError(f"sumo.time_to_teleport must be a number of seconds or null, got {self.time_to_teleport!r}")
        if not _finite(self.scale) or self.scale <= 0:
            raise ValueError(f"sumo.scale must be a positive number (the demand factor), got {self.scale!r}")
        if not _finite(self.connect_timeout) or self.connect_timeout <= 0:
            raise ValueError(f"sumo.connect_timeout must be positive, got {self.connect_timeout!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for manifests and trace headers)."""
        return asdict(self)

    def arguments(self) -> list[str]:
        """SUMO command-line options (without the binary and without TraCI/log options)."""
        args: list[str] = []
        if self.config_file is not None:
            args += ["-c", self.config_file]
        if self.net_file is not None:
            args += ["-n", self.net_file]
        if self.route_files:
            args += ["-r", ",".join(self.route_files)]
        if self.additional_files:
            args += ["-a", ",".join(self.additional_files)]
        args += ["--step-length", _num(self.step_length), "--seed", str(self.seed)]
        if self.begin is not None:
            args += ["--begin", _num(self.begin)]
        if self.time_to_teleport is not None:
            args += ["--time-to-teleport", _num(self.time_to_teleport)]
        if float(self.scale) != 1.0:
            args += ["--scale", _num(self.scale)]
        args += ["--no-step-log", "true", "--duration-log.disable", "true"]
        if not self.verbose:
            args += ["--no-warnings", "true"]
        return merge_args(args, self.extra_args)


_SHORT_OPTIONS = {"c": "configuration-file", "n": "net-file", "r": "route-files", "a": "additional-files",
                  "b": "begin", "e": "end", "s": "route-steps", "v": "verbose", "W": "no-warnings", "l": "log",
                  "t": "duration-log.statistics"}


def _is_option(token: str) -> bool:
    return token.startswith("--") or (len(token) == 2 and token[0] == "-" and token[1].isalpha())


def _option_name(token: str) -> str:
    name = token.lstrip("-").split("=", 1)[0]
    return _SHORT_OPTIONS.get(name, name) if not token.startswith("--") else name


def parse_args(args: Sequence[str]) -> list[tuple[str, list[str]]]:
    """SUMO command-line tokens as ``(option name, tokens)`` pairs, in order.

    A token starting with ``--`` (or ``-`` and one letter) is an option; the next token is its
    value unless it is itself an option (a bare flag such as ``--ramps.guess``). Short names are
    mapped to the long ones (``-n`` is ``net-file``) so both spellings name the same option.
    A value without an option before it raises ValueError.
    """
    out: list[tuple[str, list[str]]] = []
    tokens = [str(a) for a in args]
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not _is_option(tok):
            raise ValueError(f"SUMO argument {tok!r} is not an option (options start with '--'): {tokens}")
        if "=" in tok or i + 1 >= len(tokens) or _is_option(tokens[i + 1]):
            out.append((_option_name(tok), [tok]))
            i += 1
        else:
            out.append((_option_name(tok), [tok, tokens[i + 1]]))
            i += 2
    return out


def merge_args(*arg_lists: Sequence[str]) -> list[str]:
    """Concatenate SUMO argument lists, a later option replacing an earlier one of the same name.

    SUMO refuses an option given twice, so options are merged instead: the first occurrence keeps
    its place and takes the last value given for it (``--time-to-teleport 300`` then
    ``--time-to-teleport 600`` gives ``--time-to-teleport 600``).
    """
    merged: dict[str, list[str]] = {}
    for args in arg_lists:
        for name, tokens in parse_args(args):
            merged[name] = tokens
    return [t for tokens in merged.values() for t in tokens]


def options_dict(args: Sequence[str]) -> dict[str, str | None]:
    """SUMO arguments as ``{option name: value or None for a bare flag}`` (later ones win)."""
    return {name: (tokens[1] if len(tokens) > 1 else (tokens[0].split("=", 1)[1] if "=" in tokens[0] else None))
            for name, tokens in parse_args(args)}


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _num(value: float) -> str:
    return repr(float(value)) if float(value) != int(value) else str(int(value))


# --------------------------------------------------------------------------------------------
# the session


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

    def __enter__(self) -> "SumoSession":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def is_open(self) -> bool:
        """True between a successful :meth:`start` and :meth:`close` (or SUMO's death)."""
        return self._open

    @property
    def time(self) -> float:
        """Current simulated time in seconds."""
        return self._time

    @property
    def end(self) -> float | None:
        """Simulated time at which this session stops (config end or the .sumocfg's end)."""
        return self._end

    @property
    def teleports(self) -> int:
        """Number of teleports started since the beginning of the run."""
        return self._teleports

    @property
    def workdir(self) -> Path | None:
        """Directory holding SUMO's logs for this session (kept after a failure)."""
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
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=tool_env(),
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
            raise SumoError(
                f"SUMO (traci) exited during start-up with {_describe_exit(code)}\n{self._log_tail()}"
            )
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
                try:
                    api.close(wait=False)
                except Exception:  # the connection may already be gone; the process is reaped below
                    pass
            if self._proc is not None:
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._kill_proc()
        if self._workdir is not None and (not self._dead or not self._log_text().strip()):
            shutil.rmtree(self._workdir, ignore_errors=True)

    @staticmethod
    def _safe_libsumo_close(libsumo: Any) -> None:
        try:
            libsumo.close()
        except Exception:  # nothing left to close after a failed start or a fatal error
            pass

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
                    chunks.append(_read_tail(p))
        return "\n".join(chunks)

    def _log_tail(self) -> str:
        tail = _tail(self._log_text())
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
        return module.startswith("traci") or module.startswith("libsumo") or type(exc).__name__ in (
            "TraCIException", "FatalTraCIError")

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
                exit_info = f"; the sumo process (pid {self._proc.pid}) ended with {_describe_exit(code)}"
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
        return int(self._call("simulation.getMinExpectedNumber",
                              lambda: self._api.simulation.getMinExpectedNumber())) <= 0

    def step(self) -> float:
        """Advance SUMO by one step; returns the new simulated time (s)."""
        api = self._api

        def _do() -> tuple[float, tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
            api.simulationStep()
            sim = api.simulation
            return (float(sim.getTime()), tuple(sim.getArrivedIDList()), tuple(sim.getDepartedIDList()),
                    tuple(sim.getStartingTeleportIDList()))

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
        self._call(f"poi.add({poi_id!r})",
                   lambda: self._api.poi.add(poi_id, float(x), float(y), (255, 0, 0, 255), "vmc-rsu"))

    def subscribe_context(self, poi_id: str, radius: float) -> None:
        """Subscribe position and speed of every vehicle within ``radius`` m of a POI, every step."""
        from traci import constants as tc
        self._call(
            f"poi.subscribeContext({poi_id!r})",
            lambda: self._api.poi.subscribeContext(poi_id, tc.CMD_GET_VEHICLE_VARIABLE, float(radius),
                                                   [tc.VAR_POSITION, tc.VAR_SPEED]),
        )

    def context_states(self, poi_id: str) -> dict[str, VehicleState]:
        """(x, y, speed) of the vehicles SUMO reports in a POI's context this step."""
        from traci import constants as tc
        raw = self._call(f"poi.getContextSubscriptionResults({poi_id!r})",
                         lambda: self._api.poi.getContextSubscriptionResults(poi_id))
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
