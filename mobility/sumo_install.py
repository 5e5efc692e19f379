"""Finding SUMO and running its binaries and tools.

SUMO comes from the eclipse-sumo / libsumo / traci / sumolib wheels. The binaries (``sumo``,
``netgenerate``, ``netconvert``, ``duarouter``) and the ``tools/`` scripts (``randomTrips.py``)
live inside the eclipse-sumo wheel. A binary is found by sumolib's own lookup
(``$<NAME>_BINARY``, then ``$SUMO_HOME/bin`` when it really holds the binary, then the wheel);
nothing else (no system install on ``PATH``) is used.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from mobility.errors import SumoError

_LOG_TAIL_LINES = 15
_INSTALL = (
    "Install the SUMO wheels: pip install 'eclipse-sumo==1.28.*' 'libsumo==1.28.*' 'traci==1.28.*' 'sumolib==1.28.*'"
)


def _environment_kept():
    """A context that restores ``SUMO_HOME`` as it was: importing the wheel sets it when unset."""
    import contextlib

    @contextlib.contextmanager
    def kept():
        saved = os.environ.get("SUMO_HOME")
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop("SUMO_HOME", None)
            else:
                os.environ["SUMO_HOME"] = saved

    return kept()


def sumo_binary(name: str = "sumo") -> Path:
    """Absolute path of a SUMO binary (``sumo``, ``netgenerate``, ``netconvert``, ``duarouter``),
    found by ``sumolib.checkBinary``; raises SumoError naming the places checked when it is not there."""
    try:
        from sumolib import checkBinary
    except ImportError as exc:
        raise SumoError(f"SUMO binary {name!r} not found: sumolib is not installed. {_INSTALL}") from exc
    with _environment_kept():
        found = checkBinary(name)
    if not os.path.isabs(found) or not os.path.isfile(found):  # sumolib falls back to a bare name on PATH
        raise SumoError(
            f"SUMO binary {name!r} not found; checked ${name.upper()}_BINARY, $SUMO_HOME/bin "
            f"(SUMO_HOME={os.environ.get('SUMO_HOME')!r}) and the eclipse-sumo wheel. {_INSTALL}"
        )
    return Path(found)


def sumo_home(binary: str = "sumo") -> Path:
    """The SUMO installation in use: the one that holds ``bin/<binary>``."""
    return sumo_binary(binary).parent.parent


def _wheel_home() -> Path | None:
    with _environment_kept():
        try:
            import sumo as _sumo_wheel
        except ImportError:
            return None
    return Path(_sumo_wheel.SUMO_HOME)


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


def read_tail(path: Path, limit: int = 1 << 16) -> str:
    """The last ``limit`` bytes of a log (a run's warnings can fill megabytes)."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - limit))
        return f.read().decode(errors="replace")


def log_tail(text: str, lines: int = _LOG_TAIL_LINES) -> str:
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
            f"{what} failed with {describe_exit(proc.returncode)}; command: {' '.join(map(str, args))}\n"
            f"{log_tail(proc.stderr + proc.stdout)}"
        )
    return proc


def run_tool(
    script: str, args: Sequence[object], *, what: str, cwd: str | Path | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a Python script from SUMO's ``tools/`` with this interpreter."""
    return run_command([sys.executable, str(sumo_tool(script)), *map(str, args)], what=what, cwd=cwd, timeout=timeout)


def describe_exit(code: int | None) -> str:
    if code is None:
        return "no exit status (still running)"
    if code < 0:
        try:
            return f"exit status {code} (killed by {signal.Signals(-code).name})"
        except ValueError:
            return f"exit status {code} (killed by signal {-code})"
    return f"exit status {code}"
