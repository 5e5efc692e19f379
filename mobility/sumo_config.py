"""How to run SUMO: the backend, the inputs, the time window and seed, and SUMO's command-line options."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


def sumo_name_problem(path: str | os.PathLike[str]) -> str | None:
    """Why SUMO cannot take ``path`` as an input file, or None. SUMO splits every file option at
    commas (``-n a,b.net.xml`` reads ``a`` and ``b.net.xml``, and a ``.sumocfg`` in a folder with a
    comma loses the files it names) and strips white space from each name; other characters
    (spaces inside, ``;``, ``#``, quotes, non-ASCII) work, as tried with the sumo binary of 1.28."""
    text = os.fspath(path)
    if "," in text:
        return "it has a ',' in its path (SUMO splits its file options at commas: rename the file or its folder)"
    if text != text.strip():
        return "its name begins or ends with white space (SUMO strips it from each file name)"
    return None


class Backend(str, Enum):
    """How SUMO is driven."""

    LIBSUMO = "libsumo"
    TRACI = "traci"


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
        named = [("config_file", self.config_file), ("net_file", self.net_file)]
        named += [(f"{k}[{i}]", f) for k in ("route_files", "additional_files") for i, f in enumerate(getattr(self, k))]
        for name, path in named:
            problem = sumo_name_problem(path) if path is not None else None
            if problem:
                raise ValueError(f"sumo.{name}: SUMO cannot take the file {str(path)!r}: {problem}")
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
            raise ValueError(
                f"sumo.time_to_teleport must be a number of seconds or null, got {self.time_to_teleport!r}"
            )
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


_SHORT_OPTIONS = {
    "c": "configuration-file",
    "n": "net-file",
    "r": "route-files",
    "a": "additional-files",
    "b": "begin",
    "e": "end",
    "s": "route-steps",
    "v": "verbose",
    "W": "no-warnings",
    "l": "log",
    "t": "duration-log.statistics",
}


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


OUTPUT_OPTION_ENDINGS = ("output", "-output", "log", "error-log", "message-log")
"""Option-name endings of SUMO's outputs and logs (``--vehroute-output``, ``--error-log``)."""
OUTPUT_OPTION_PREFIXES = ("vehroute-output", "fcd-output", "tripinfo-output", "summary-output", "device.vehroute")
"""Option-name prefixes of how SUMO's outputs are written (``--vehroute-output.exit-times``)."""


def traffic_args(args: Sequence[str]) -> list[str]:
    """``args`` without SUMO's output and log options: what of them decides the traffic (for cache
    keys, so that asking for an output does not make the same traffic new)."""
    kept: list[str] = []
    for name, tokens in parse_args(args):
        if name.endswith(OUTPUT_OPTION_ENDINGS) or name.startswith(OUTPUT_OPTION_PREFIXES):
            continue
        kept += tokens
    return kept


def options_dict(args: Sequence[str]) -> dict[str, str | None]:
    """SUMO arguments as ``{option name: value or None for a bare flag}`` (later ones win)."""
    return {
        name: (tokens[1] if len(tokens) > 1 else (tokens[0].split("=", 1)[1] if "=" in tokens[0] else None))
        for name, tokens in parse_args(args)
    }


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _num(value: float) -> str:
    return repr(float(value)) if float(value) != int(value) else str(int(value))
