"""V2I channel model: what a transfer between a vehicle and its RSU costs in simulated time.

Link budget (all in dB)::

    SNR = P_tx + G_ant - PL(d) - S - N,    N = N0 + 10 log10(B) + NF

with ``P_tx`` the transmitter's power (RSU on the downlink, vehicle on the uplink), ``G_ant`` the
sum of both antenna gains, ``PL`` the path loss below, ``S`` an optional log-normal shadowing term,
``N0`` the thermal noise density (-174 dBm/Hz), ``B`` the channel bandwidth and ``NF`` the
receiver noise figure. The rate of one transfer that holds ``share`` Hz of the channel is::

    rate = min(rate_cap, share * min(log2(1 + SNR), spectral_efficiency_cap))

Path-loss models (``d`` is the 3-D distance in metres, computed from the 2-D ground distance and
the two antenna heights; ``fc`` in GHz):

* ``tr37885_urban_los`` (default): ``38.77 + 16.7 log10(d) + 18.2 log10(fc)``, 3GPP TR 37.885
  Table 6.2.1-1, urban LOS (also used there for NLOSv before the blockage loss).
* ``tr37885_highway_los``: ``32.4 + 20 log10(d) + 20 log10(fc)``, same table, highway LOS.
* ``tr38901_umi_los``: UMi-Street Canyon LOS of 3GPP TR 38.901 Table 7.4.1-1, for an RSU mounted
  like a small cell: ``32.4 + 21 log10(d) + 20 log10(fc)`` up to the breakpoint
  ``d'_BP = 4 h'_RSU h'_veh fc / c`` (``h' = h - 1 m``, ``c = 3e8``), then
  ``32.4 + 40 log10(d) + 20 log10(fc) - 9.5 log10(d'_BP^2 + (h_RSU - h_veh)^2)``.
* ``free_space``: Friis, ``20 log10(4 pi d f / c)``.
* ``log_distance``: free space up to ``log_distance_ref_m``, then ``10 n log10(d / d0)`` more.

The defaults (RSU antenna 5 m, vehicle antenna 1.5 m, noise figure 9 dB, 5.9 GHz) follow the
3GPP V2X evaluation assumptions (TR 36.885 / TR 37.885). The 3GPP formulas are stated for
distances of a few metres and more; every model clamps the ground distance to ``min_distance_m``.

Sharing: each RSU has one channel of ``bandwidth_hz`` per direction (``duplex="separate"``, as
with FDD or two dedicated sub-channels) or one channel for both directions (``duplex="shared"``).
The transfers active on a channel share it equally in time (processor sharing, a round-robin
scheduler): ``share = bandwidth_hz / n`` and the SNR is that of the full channel, so below the
caps two transfers each get exactly half the rate of one alone. A broadcast occupies one slot.

Rates follow the vehicles: whenever a transfer starts or ends on a channel, and every
``update_interval`` seconds in between, each active transfer's rate is recomputed from the
vehicle's position at that instant (``position_fn(vehicle)`` returns ``(x, y)``, or ``None``
once the vehicle is gone). Between two recomputations the rate is constant and progress is
integrated exactly (a transfer that ends in between ends at its exact time), so with ``(x, y)``
alone the error of a moving vehicle's transfer time is first order in ``update_interval``. A
``position_fn`` that also returns the velocity, ``(x, y, vx, vy)`` in m/s (SUMO knows it), gets
the rate evaluated at the predicted midpoint of each piece instead, which is second order: much
more accurate at the same ``update_interval``. Coverage is polled at the same instants; an engine
that knows the exact moment a vehicle leaves should call :meth:`RsuChannel.leave` then.

Shadowing (off by default) is a log-normal process per link, correlated over the distance the
vehicle moves (``exp(-moved / shadowing_decorrelation_m)``, as in the 3GPP V2X evaluation
methodology, TR 36.885 A.1.4, which uses 3 dB and 25 m on highways), drawn from the numpy
Generator given to :class:`RsuChannel`; it is drawn independently for every transfer.

This module knows nothing about SUMO or the federated core: positions and coverage come in as
callables.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Generator, Hashable, Iterable

import numpy as np
import simpy

PATH_LOSS_MODELS = ("tr37885_urban_los", "tr37885_highway_los", "tr38901_umi_los", "free_space", "log_distance")
DIRECTIONS = ("downlink", "uplink")
DUPLEX_MODES = ("separate", "shared")
REASONS = ("done", "left_coverage", "aborted")

SPEED_OF_LIGHT = 299_792_458.0
_C_3GPP = 3.0e8

Position = tuple[float, float]
PositionFn = Callable[[Hashable], "tuple[float, ...] | None"]
CoverageFn = Callable[[Hashable], bool]


def _num(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(v)


def _pos(v: Any) -> bool:
    return _num(v) and v > 0


@dataclass
class ChannelConfig:
    """Radio parameters of every RSU's channel (filled from the scenario's ``channel`` section)."""

    path_loss_model: str = "tr37885_urban_los"
    carrier_ghz: float = 5.9
    tx_power_dbm_downlink: float = 23.0
    tx_power_dbm_uplink: float = 23.0
    antenna_gain_db: float = 0.0
    rsu_height_m: float = 5.0
    vehicle_height_m: float = 1.5
    noise_figure_db: float = 9.0
    noise_density_dbm_hz: float = -174.0
    bandwidth_hz: float = 20e6
    duplex: str = "separate"
    rate_cap_bps: float | None = 100e6
    spectral_efficiency_cap: float | None = None
    path_loss_exponent: float = 2.7
    log_distance_ref_m: float = 1.0
    shadowing_sigma_db: float = 0.0
    shadowing_decorrelation_m: float = 10.0
    update_interval: float = 1.0
    min_distance_m: float = 1.0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first bad field."""
        if self.path_loss_model not in PATH_LOSS_MODELS:
            raise ValueError(f"channel.path_loss_model must be one of {PATH_LOSS_MODELS}, got {self.path_loss_model!r}")
        if self.duplex not in DUPLEX_MODES:
            raise ValueError(f"channel.duplex must be one of {DUPLEX_MODES}, got {self.duplex!r}")
        for name in ("tx_power_dbm_downlink", "tx_power_dbm_uplink", "antenna_gain_db", "noise_figure_db",
                     "noise_density_dbm_hz"):
            if not _num(getattr(self, name)):
                raise ValueError(f"channel.{name} must be a finite number (dB), got {getattr(self, name)!r}")
        for name in ("carrier_ghz", "rsu_height_m", "vehicle_height_m", "bandwidth_hz", "path_loss_exponent",
                     "log_distance_ref_m", "shadowing_decorrelation_m", "update_interval", "min_distance_m"):
            if not _pos(getattr(self, name)):
                raise ValueError(f"channel.{name} must be a positive number, got {getattr(self, name)!r}")
        for name in ("rate_cap_bps", "spectral_efficiency_cap"):
            v = getattr(self, name)
            if v is not None and not _pos(v):
                raise ValueError(f"channel.{name} must be a positive number or null, got {v!r}")
        if not _num(self.shadowing_sigma_db) or self.shadowing_sigma_db < 0:
            raise ValueError("channel.shadowing_sigma_db must be a non-negative number, "
                             f"got {self.shadowing_sigma_db!r}")
        if self.path_loss_model == "tr38901_umi_los":
            for name in ("rsu_height_m", "vehicle_height_m"):
                if getattr(self, name) <= 1.0:
                    raise ValueError(f"channel.{name} must exceed 1 m for tr38901_umi_los "
                                     f"(effective height h - 1 m), got {getattr(self, name)!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (run manifests)."""
        return asdict(self)


def _check_direction(direction: str) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")


def _fspl_db(d3d: float, carrier_ghz: float) -> float:
    return 20.0 * math.log10(4.0 * math.pi * d3d * carrier_ghz * 1e9 / SPEED_OF_LIGHT)


def path_loss_db(distance_m: float, cfg: ChannelConfig) -> float:
    """Path loss (dB) at ground distance ``distance_m`` from the RSU, for ``cfg.path_loss_model``.

    The ground distance is clamped to ``cfg.min_distance_m`` and turned into a 3-D distance with
    the antenna heights, since the 3GPP formulas are written in terms of the 3-D distance.
    """
    d2d = max(float(distance_m), cfg.min_distance_m)
    dh = cfg.rsu_height_m - cfg.vehicle_height_m
    d3d = math.hypot(d2d, dh)
    fc = cfg.carrier_ghz
    model = cfg.path_loss_model
    if model == "tr37885_urban_los":
        return 38.77 + 16.7 * math.log10(d3d) + 18.2 * math.log10(fc)
    if model == "tr37885_highway_los":
        return 32.4 + 20.0 * math.log10(d3d) + 20.0 * math.log10(fc)
    if model == "tr38901_umi_los":
        d_bp = 4.0 * (cfg.rsu_height_m - 1.0) * (cfg.vehicle_height_m - 1.0) * fc * 1e9 / _C_3GPP
        if d2d <= d_bp:
            return 32.4 + 21.0 * math.log10(d3d) + 20.0 * math.log10(fc)
        return 32.4 + 40.0 * math.log10(d3d) + 20.0 * math.log10(fc) - 9.5 * math.log10(d_bp**2 + dh**2)
    if model == "free_space":
        return _fspl_db(d3d, fc)
    d0 = cfg.log_distance_ref_m
    if d3d <= d0:
        return _fspl_db(d3d, fc)
    return _fspl_db(d0, fc) + 10.0 * cfg.path_loss_exponent * math.log10(d3d / d0)


def noise_dbm(cfg: ChannelConfig) -> float:
    """Noise power (dBm) over the whole channel: thermal density + bandwidth + noise figure."""
    return cfg.noise_density_dbm_hz + 10.0 * math.log10(cfg.bandwidth_hz) + cfg.noise_figure_db


def snr_db(distance_m: float, direction: str, cfg: ChannelConfig, shadowing_db: float = 0.0) -> float:
    """SNR (dB) over the full channel at ground distance ``distance_m``; ``shadowing_db`` adds loss."""
    _check_direction(direction)
    p_tx = cfg.tx_power_dbm_downlink if direction == "downlink" else cfg.tx_power_dbm_uplink
    return p_tx + cfg.antenna_gain_db - path_loss_db(distance_m, cfg) - shadowing_db - noise_dbm(cfg)


def rate_bps(distance_m: float, share_hz: float, direction: str, cfg: ChannelConfig,
             shadowing_db: float = 0.0) -> float:
    """Shannon rate (bit/s) of a transfer holding ``share_hz`` of the channel, with both caps applied."""
    if not _num(share_hz) or share_hz < 0:
        raise ValueError(f"share_hz must be a non-negative number, got {share_hz!r}")
    se = math.log2(1.0 + 10.0 ** (snr_db(distance_m, direction, cfg, shadowing_db) / 10.0))
    if cfg.spectral_efficiency_cap is not None:
        se = min(se, cfg.spectral_efficiency_cap)
    rate = share_hz * se
    if cfg.rate_cap_bps is not None:
        rate = min(rate, cfg.rate_cap_bps)
    return rate


class _Span:
    """Duration and mean rate of a finished transmission (shared by both result kinds)."""

    start: float
    end: float
    bytes_sent: int

    @property
    def duration(self) -> float:
        """Simulated seconds from start to end (success or failure)."""
        return self.end - self.start

    @property
    def mean_rate_bps(self) -> float:
        """Bits delivered per simulated second (0 for an instantaneous transmission)."""
        return self.bytes_sent * 8.0 / self.duration if self.duration > 0 else 0.0


@dataclass(frozen=True)
class TransferResult(_Span):
    """Outcome of one transfer (or of one receiver of a broadcast): what the engine records."""

    ok: bool
    bytes_sent: int
    start: float
    end: float
    reason: str
    vehicle: Hashable = None
    direction: str = "downlink"
    nbytes: int = 0
    rsu: str = ""
    tag: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain dict with the derived duration and mean rate (records)."""
        d = asdict(self)
        d["duration"] = self.duration
        d["mean_rate_bps"] = self.mean_rate_bps
        return d


@dataclass(frozen=True)
class BroadcastResult(_Span):
    """Outcome of one downlink broadcast; ``receivers`` holds each receiver's own result."""

    ok: bool
    bytes_sent: int
    start: float
    end: float
    reason: str
    receivers: dict[Hashable, TransferResult] = field(default_factory=dict)
    nbytes: int = 0
    rsu: str = ""
    tag: str | None = None
    direction: str = "downlink"

    @property
    def delivered(self) -> list[Hashable]:
        """Receivers that got the whole payload."""
        return [v for v, r in self.receivers.items() if r.ok]

    @property
    def dropped(self) -> list[Hashable]:
        """Receivers that left (or were aborted) before the end."""
        return [v for v, r in self.receivers.items() if not r.ok]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict with per-receiver results (records)."""
        return {"ok": self.ok, "bytes_sent": self.bytes_sent, "start": self.start, "end": self.end,
                "reason": self.reason, "nbytes": self.nbytes, "rsu": self.rsu, "tag": self.tag,
                "direction": self.direction, "duration": self.duration, "mean_rate_bps": self.mean_rate_bps,
                "receivers": {str(v): r.to_dict() for v, r in self.receivers.items()}}


class _Receiver:
    __slots__ = ("vehicle", "pos", "vel", "shadow_db", "shadow_pos")

    def __init__(self, vehicle: Hashable) -> None:
        self.vehicle = vehicle
        self.pos: Position | None = None
        self.vel: Position | None = None
        self.shadow_db: float | None = None
        self.shadow_pos: Position | None = None


class _Flow:
    """One transmission on a channel: a unicast transfer (one receiver) or a broadcast."""

    def __init__(self, env: simpy.Environment, direction: str, nbytes: int, start: float, receivers: list[Hashable],
                 position_fn: PositionFn, coverage_fn: CoverageFn, broadcast: bool, tag: str | None) -> None:
        self.direction = direction
        self.nbytes = nbytes
        self.bits_total = 8.0 * nbytes
        self.bits_done = 0.0
        self.rate = 0.0
        self.start = start
        self.receivers = {v: _Receiver(v) for v in receivers}
        self.finished: dict[Hashable, TransferResult] = {}
        self.pending: dict[Hashable, str] = {}
        self.position_fn = position_fn
        self.coverage_fn = coverage_fn
        self.broadcast = broadcast
        self.tag = tag
        self.done = env.event()


class _Pool:
    """The flows sharing one channel, and the process that advances them."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.flows: list[_Flow] = []
        self.last = 0.0
        self.process: simpy.Process | None = None
        self.wake: simpy.Event | None = None


class RsuChannel:
    """The radio channel(s) of one RSU, running transfers as simpy processes with processor sharing.

    ``position`` is the RSU's (x, y) in network coordinates (m). ``rng`` is needed only when
    ``cfg.shadowing_sigma_db > 0``. Every finished transfer or broadcast is appended to
    :attr:`records`.
    """

    def __init__(self, cfg: ChannelConfig, position: Position, *, rng: np.random.Generator | None = None,
                 rsu_id: str = "rsu", env: simpy.Environment | None = None) -> None:
        if cfg.shadowing_sigma_db > 0 and rng is None:
            raise ValueError("channel.shadowing_sigma_db > 0 needs a numpy Generator (rng) for the channel stream")
        if len(position) != 2 or not all(_num(c) for c in position):
            raise ValueError(f"RSU position must be finite (x, y), got {position!r}")
        self.cfg = cfg
        self.position = (float(position[0]), float(position[1]))
        self.rng = rng
        self.rsu_id = rsu_id
        self.env = env
        self.records: list[TransferResult | BroadcastResult] = []
        self._pools: dict[str, _Pool] = {}

    def distance(self, pos: Position) -> float:
        """Ground distance (m) from the RSU to ``pos``."""
        return math.hypot(pos[0] - self.position[0], pos[1] - self.position[1])

    def active(self, direction: str) -> int:
        """Number of transmissions currently sharing the channel used by ``direction``."""
        _check_direction(direction)
        pool = self._pools.get(self._pool_key(direction))
        return len(pool.flows) if pool else 0

    def transfer(self, env: simpy.Environment, vehicle: Hashable, nbytes: int, direction: str,
                 position_fn: PositionFn, coverage_fn: CoverageFn, *, tag: str | None = None) -> simpy.Process:
        """Start sending ``nbytes`` to (downlink) or from (uplink) ``vehicle``.

        The returned process's value is a TransferResult; interrupting the process aborts it.
        """
        _check_direction(direction)
        self._bind(env)
        n = self._check_nbytes(nbytes)
        return env.process(self._run(env, direction, n, [vehicle], position_fn, coverage_fn, False, tag))

    def broadcast(self, env: simpy.Environment, vehicles: Iterable[Hashable], nbytes: int,
                  position_fn: PositionFn, coverage_fn: CoverageFn, *, tag: str | None = None) -> simpy.Process:
        """Send ``nbytes`` once on the downlink to all ``vehicles`` at the worst receiver's rate.

        Receivers that leave are dropped (and reported); the transmission goes on for the rest.
        The process value is a BroadcastResult.
        """
        self._bind(env)
        n = self._check_nbytes(nbytes)
        receivers = list(dict.fromkeys(vehicles))
        return env.process(self._run(env, "downlink", n, receivers, position_fn, coverage_fn, True, tag))

    def leave(self, vehicle: Hashable) -> None:
        """Fail ``vehicle``'s transfers now with "left_coverage" and drop it from broadcasts."""
        self._request_drop(vehicle, "left_coverage")

    def abort(self, vehicle: Hashable) -> None:
        """Cancel ``vehicle``'s transfers now with "aborted" and drop it from broadcasts."""
        self._request_drop(vehicle, "aborted")

    def _bind(self, env: simpy.Environment) -> None:
        if self.env is None:
            self.env = env
        elif self.env is not env:
            raise ValueError(f"RSU channel {self.rsu_id!r} is already bound to another simpy environment")

    @staticmethod
    def _check_nbytes(nbytes: int) -> int:
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes < 0:
            raise ValueError(f"nbytes must be a non-negative integer, got {nbytes!r}")
        return int(nbytes)

    def _pool_key(self, direction: str) -> str:
        return "shared" if self.cfg.duplex == "shared" else direction

    def _request_drop(self, vehicle: Hashable, reason: str) -> None:
        for pool in self._pools.values():
            hit = False
            for flow in pool.flows:
                if vehicle in flow.receivers:
                    flow.pending.setdefault(vehicle, reason)
                    hit = True
            if hit:
                self._wake(pool)

    def _wake(self, pool: _Pool) -> None:
        if pool.wake is not None and not pool.wake.triggered:
            pool.wake.succeed()

    def _run(self, env: simpy.Environment, direction: str, nbytes: int, receivers: list[Hashable],
             position_fn: PositionFn, coverage_fn: CoverageFn, broadcast: bool,
             tag: str | None) -> Generator[simpy.Event, Any, TransferResult | BroadcastResult]:
        flow = _Flow(env, direction, nbytes, env.now, receivers, position_fn, coverage_fn, broadcast, tag)
        for v in list(flow.receivers):
            if not self._covered(flow, flow.receivers[v]):
                self._drop(flow, v, "left_coverage", env.now)
        if not flow.receivers or nbytes == 0:
            self._complete(flow, env.now)
        else:
            pool = self._pools.setdefault(self._pool_key(direction), _Pool(self._pool_key(direction)))
            if pool.process is None or not pool.process.is_alive:
                pool.last = env.now
                pool.flows.append(flow)
                pool.process = env.process(self._serve(env, pool))
            else:
                pool.flows.append(flow)
                self._wake(pool)
        while True:
            try:
                result = yield flow.done
                return result
            except simpy.Interrupt:
                for v in flow.receivers:
                    flow.pending.setdefault(v, "aborted")
                pool = self._pools.get(self._pool_key(direction))
                if pool is not None:
                    self._wake(pool)

    def _covered(self, flow: _Flow, rx: _Receiver) -> bool:
        pos = flow.position_fn(rx.vehicle)
        if pos is None or not flow.coverage_fn(rx.vehicle):
            return False
        rx.pos = (float(pos[0]), float(pos[1]))
        rx.vel = (float(pos[2]), float(pos[3])) if len(pos) >= 4 else None
        return True

    def _serve(self, env: simpy.Environment, pool: _Pool) -> Generator[simpy.Event, Any, None]:
        """Advance every flow of ``pool`` between events; exits when the channel is idle."""
        while True:
            self._step(env, pool)
            if not pool.flows:
                pool.wake = None
                return
            pool.wake = env.event()
            yield env.timeout(self._horizon(pool)) | pool.wake

    def _step(self, env: simpy.Environment, pool: _Pool) -> None:
        now = env.now
        dt = now - pool.last
        if dt > 0:
            for f in pool.flows:
                f.bits_done = min(f.bits_total, f.bits_done + f.rate * dt)
        pool.last = now
        for f in list(pool.flows):
            left = f.bits_total - f.bits_done
            if left <= 1e-9 * f.bits_total + 1e-6 or (f.rate > 0 and now + left / f.rate <= now):
                f.bits_done = f.bits_total
                self._complete(f, now)
                pool.flows.remove(f)
        for f in list(pool.flows):
            for v in list(f.receivers):
                reason = f.pending.pop(v, None)
                if reason is None and not self._covered(f, f.receivers[v]):
                    reason = "left_coverage"
                if reason is not None:
                    self._drop(f, v, reason, now)
            f.pending.clear()
            if not f.receivers:
                self._complete(f, now)
                pool.flows.remove(f)
        if pool.flows:
            self._set_rates(pool)

    def _horizon(self, pool: _Pool) -> float:
        """Time to the next recomputation: the update interval, or the first finish if sooner."""
        delay = self.cfg.update_interval
        for f in pool.flows:
            if f.rate > 0:
                delay = min(delay, (f.bits_total - f.bits_done) / f.rate)
        return max(delay, 0.0)

    def _set_rates(self, pool: _Pool) -> None:
        """Rates of all flows for the coming piece (constant until the next recomputation).

        Receivers whose position came with a velocity are evaluated where they will be halfway
        through the piece (midpoint rule); the piece length depends on the rates, so this is
        refined twice. Without a velocity the rate is the one at the current position.
        """
        share = self.cfg.bandwidth_hz / len(pool.flows)
        shadows = {id(rx): self._shadow(rx) for f in pool.flows for rx in f.receivers.values()}

        def assign(ahead: float) -> None:
            for f in pool.flows:
                f.rate = min(self._rx_rate(f, rx, share, shadows[id(rx)], ahead) for rx in f.receivers.values())

        assign(0.0)
        if any(rx.vel is not None for f in pool.flows for rx in f.receivers.values()):
            for _ in range(2):
                assign(self._horizon(pool) / 2.0)

    def _shadow(self, rx: _Receiver) -> float:
        """Advance the receiver's correlated shadowing to its current position (0 when disabled)."""
        sigma = self.cfg.shadowing_sigma_db
        if sigma <= 0:
            return 0.0
        if rx.shadow_db is None:
            rx.shadow_db = float(self.rng.normal(0.0, sigma))
        else:
            moved = math.hypot(rx.pos[0] - rx.shadow_pos[0], rx.pos[1] - rx.shadow_pos[1])
            if moved > 0:
                r = math.exp(-moved / self.cfg.shadowing_decorrelation_m)
                rx.shadow_db = r * rx.shadow_db + math.sqrt(1.0 - r * r) * float(self.rng.normal(0.0, sigma))
        rx.shadow_pos = rx.pos
        return rx.shadow_db

    def _rx_rate(self, flow: _Flow, rx: _Receiver, share: float, shadow: float, ahead: float) -> float:
        x, y = rx.pos
        if rx.vel is not None and ahead > 0:
            x, y = x + rx.vel[0] * ahead, y + rx.vel[1] * ahead
        return rate_bps(self.distance((x, y)), share, flow.direction, self.cfg, shadow)

    def _drop(self, flow: _Flow, vehicle: Hashable, reason: str, now: float) -> None:
        flow.receivers.pop(vehicle)
        flow.finished[vehicle] = self._result(flow, vehicle, False, reason, now)

    def _result(self, flow: _Flow, vehicle: Hashable, ok: bool, reason: str, now: float) -> TransferResult:
        sent = flow.nbytes if ok else min(flow.nbytes, int(flow.bits_done // 8))
        return TransferResult(ok=ok, bytes_sent=sent, start=flow.start, end=now, reason=reason, vehicle=vehicle,
                              direction=flow.direction, nbytes=flow.nbytes, rsu=self.rsu_id, tag=flow.tag)

    def _complete(self, flow: _Flow, now: float) -> None:
        """Close ``flow`` at ``now``: receivers still attached got everything (if it all went out)."""
        full = flow.bits_done >= flow.bits_total
        for v in list(flow.receivers):
            flow.finished[v] = self._result(flow, v, full, "done" if full else "aborted", now)
        flow.receivers.clear()
        if flow.broadcast:
            results = flow.finished
            ok = any(r.ok for r in results.values())
            if ok or not results:
                reason = "done"
            elif any(r.reason == "left_coverage" for r in results.values()):
                reason = "left_coverage"
            else:
                reason = "aborted"
            sent = flow.nbytes if full else min(flow.nbytes, int(flow.bits_done // 8))
            out: TransferResult | BroadcastResult = BroadcastResult(
                ok=ok or not results, bytes_sent=sent, start=flow.start, end=now, reason=reason,
                receivers=dict(results), nbytes=flow.nbytes, rsu=self.rsu_id, tag=flow.tag)
        else:
            out = next(iter(flow.finished.values()))
        self.records.append(out)
        flow.done.succeed(out)
