"""Device profiles: the simulated hardware that the ``profile`` time model charges jobs on.

A profile is a device's sustained FP32 throughput, ``peak x utilisation``: the peak is the
vendor's public datasheet figure for FP32 on the CUDA cores (no tensor-core, TF32 or sparse
figure), and the utilisation the share of it that training small CNNs in FP32 sustains.
Kernels of the models here are small (a mini-batch of 64 MNIST images through the paper's CNN,
forward and backward, is under 2 GFLOP) and spend much of their time launching and moving
memory, so every built-in profile takes one explicit assumed utilisation, :data:`UTILISATION` =
0.3; a profile that knows better sets its own. A figure not printed in a datasheet is derived from what is
(CUDA cores x 2 FLOPs a fused multiply-add x clock) and its ``source`` says so.

The scenario picks the clients' device (``compute.profile``; null = :data:`ONBOARD_DEFAULT`
for ``compute.mode: onboard``, :data:`EDGE_DEFAULT` for ``shared_gpu``) and the coordinator's
(``compute.coordinator_profile``; null = :data:`EDGE_DEFAULT`), by name or as a custom
profile ``{name, flops_per_s, source, description}`` whose ``flops_per_s`` is charged as given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from fl_core.registry import Registry

UTILISATION = 0.3
"""Assumed share of the FP32 peak that small-CNN training sustains (every built-in profile)."""


@dataclass(frozen=True)
class DeviceProfile:
    """One simulated device: ``flops_per_s`` is what a job is charged at; ``peak_flops_per_s``
    and ``utilisation`` say where it comes from (None for a custom profile given sustained)."""

    name: str
    description: str
    flops_per_s: float
    source: str
    peak_flops_per_s: float | None = None
    utilisation: float | None = None

    def __post_init__(self) -> None:
        if not self.flops_per_s > 0:
            raise ValueError(f"device profile {self.name!r}: flops_per_s must be > 0, got {self.flops_per_s}")

    def seconds(self, flops: float) -> float:
        """Simulated seconds this device takes for ``flops``."""
        return flops / self.flops_per_s

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def rated(name: str, description: str, peak: float, source: str, utilisation: float = UTILISATION) -> DeviceProfile:
    """A profile from a datasheet's FP32 peak and the utilisation assumed of it."""
    return DeviceProfile(name, description, peak * utilisation, source, peak, utilisation)


PROFILES: Registry[DeviceProfile] = Registry(
    "device profile",
    {
        p.name: p
        for p in (
            rated(
                "jetson_orin_nano",
                "on-board unit, low end: NVIDIA Jetson Orin Nano 8GB module (1024-core Ampere GPU, 15 W)",
                1.28e12,
                "NVIDIA Jetson Orin Nano Series Data Sheet: 1024 CUDA cores at up to 625 MHz; the peak "
                "1.28 TFLOPS FP32 is derived (1024 x 2 FLOPs x 625 MHz), an assumption, not a printed figure",
            ),
            rated(
                "jetson_agx_orin",
                "on-board unit, automotive class: NVIDIA Jetson AGX Orin 64GB module (2048-core Ampere GPU, "
                "the Orin SoC of DRIVE AGX Orin)",
                5.3e12,
                "NVIDIA Jetson AGX Orin Series Technical Brief: 2048 CUDA cores, 5.3 FP32 TFLOPS (64GB module)",
            ),
            rated(
                "nvidia_a2",
                "edge-server GPU, entry level: NVIDIA A2 (60 W, PCIe)",
                4.5e12,
                "NVIDIA A2 Tensor Core GPU datasheet: peak FP32 4.5 TFLOPS",
            ),
            rated(
                "nvidia_t4",
                "edge-server GPU: NVIDIA T4 (70 W, PCIe), common in edge and roadside servers",
                8.1e12,
                "NVIDIA T4 Tensor Core GPU datasheet: single-precision (FP32) 8.1 TFLOPS",
            ),
            rated(
                "nvidia_l4",
                "edge-server GPU, current: NVIDIA L4 (72 W, PCIe)",
                30.3e12,
                "NVIDIA L4 Tensor Core GPU datasheet: FP32 30.3 TFLOPS",
            ),
            rated(
                "nvidia_a100",
                "datacenter GPU: NVIDIA A100 (SXM or PCIe)",
                19.5e12,
                "NVIDIA A100 Tensor Core GPU datasheet: FP32 19.5 TFLOPS (non-tensor)",
            ),
        )
    },
)

ONBOARD_DEFAULT = "jetson_agx_orin"
"""The clients' device for ``compute.mode: onboard`` when ``compute.profile`` is null."""
EDGE_DEFAULT = "nvidia_t4"
"""The clients' device for ``shared_gpu``, and the coordinator's, when not given."""


def profile_of(spec: str | Mapping[str, Any] | None, default: str) -> DeviceProfile:
    """The profile ``spec`` names (a built-in name, or a custom ``{name, flops_per_s, source,
    description}``); None gives ``default``. An unknown name is refused with the known ones."""
    if spec is None:
        spec = default
    if isinstance(spec, str):
        return PROFILES[spec]
    return DeviceProfile(
        name=str(spec["name"]),
        description=str(spec.get("description") or ""),
        flops_per_s=float(spec["flops_per_s"]),
        source=str(spec["source"]),
    )


def profile_table() -> list[str]:
    """The built-in profiles as Markdown table rows (``scenarios/REFERENCE.md``)."""
    rows = [
        "| name | FP32 peak (FLOP/s) | utilisation | charged (FLOP/s) | device | source |",
        "|---|---|---|---|---|---|",
    ]
    for name in PROFILES.names():
        p = PROFILES[name]
        rows.append(
            f"| `{p.name}` | {p.peak_flops_per_s:.3g} | {p.utilisation} | {p.flops_per_s:.3g} | "
            f"{p.description} | {p.source} |"
        )
    return rows
