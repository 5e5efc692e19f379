"""The time model: how many simulated seconds a job costs, built once from the scenario.

Four models (``compute.time_model``), one class each, chosen through :data:`TIME_MODELS`:

- ``profile`` (default): the job's FLOPs (:mod:`fl_core.flops`) over the sustained FLOP/s of the
  simulated device (:mod:`vmc_sim.compute.hardware`): the same figures on every host;
- ``calibrated``: a cost per unit of work, measured on this host, times the job's work
  (:mod:`vmc_sim.compute.calibration`);
- ``measured``: the host time the job took (warm-up and host noise included: not for publication);
- ``device``: a fixed per-sample device model (``compute.seconds_per_sample_epoch``).

Every world asks the same three questions: a contribution's training (+ Fisher) job, a
coordinator's solve, and a multi-round participant's local update.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fl_core.editors import EditReport
from fl_core.flops import ModelFlops, model_flops
from fl_core.registry import Registry

from ..compute.calibration import Calibration, calibrated, pinned
from ..compute.hardware import DeviceProfile
from ..scenario.schema import TimeModelKind

if TYPE_CHECKING:
    from fl_core.experiment import OneShotSetup

    from ..scenario.schema import Scenario


class TimeModel(ABC):
    """Simulated seconds of each kind of job; ``epochs`` and ``fisher`` are the run's local training."""

    kind: TimeModelKind
    calibration: Calibration | None = None

    def __init__(self, epochs: int, fisher: bool) -> None:
        self.epochs, self.fisher = epochs, fisher

    @abstractmethod
    def contribution(self, samples: int, work: int | None, host_s: Callable[[], float] | None) -> float:
        """One client's training + Fisher job on ``samples`` samples; ``work``: its sample-epochs
        when the editor counted them (multi-round editors); ``host_s``: the host time it took."""

    @abstractmethod
    def solve(self, report: EditReport) -> float:
        """The coordinator's solve of ``report`` (nothing when it solved nothing)."""

    @abstractmethod
    def local_update(self, sample_epochs: int, host_s: float, reused: bool = False) -> float:
        """One multi-round participant's local training of ``sample_epochs`` (a reused
        DG-FedReuse update trains nothing)."""

    def describe(self) -> dict[str, Any] | None:
        """What the model charges with, for the run's manifest (None: nothing beyond ``calibration``)."""
        return None


class ProfileTime(TimeModel):
    """FLOPs over device throughput. A contribution: ``samples x (epochs x train + fisher)``
    FLOPs on the clients' device (``work`` sample-epochs x ``train`` for the multi-round
    editors); a solve: ``(1 + products)`` Fisher-vector products with the sum of the subset's
    uploads (the calibrated model's units: the closed form or the residual is the one) plus a
    forward pass over the server's validation set for every damping scored, on the
    coordinator's device."""

    kind = TimeModelKind.PROFILE

    def __init__(
        self,
        epochs: int,
        fisher: bool,
        flops: ModelFlops,
        client: DeviceProfile,
        coordinator: DeviceProfile,
        validation_samples: int,
        model: str = "",
        input_shape: tuple[int, ...] = (),
    ) -> None:
        super().__init__(epochs, fisher)
        self.flops, self.client, self.coordinator = flops, client, coordinator
        self.validation_samples, self.model, self.input_shape = validation_samples, model, tuple(input_shape)

    def contribution_flops(self, samples: int, work: int | None = None) -> int:
        """FLOPs of one client's job (:meth:`contribution`)."""
        if work is not None:
            return self.flops.train * work
        return samples * (self.epochs * self.flops.train + (self.flops.fisher if self.fisher else 0))

    def contribution(self, samples: int, work: int | None, host_s: Callable[[], float] | None) -> float:
        return self.client.seconds(self.contribution_flops(samples, work))

    def solve_flops(self, report: EditReport) -> int:
        """FLOPs of the coordinator's solve of ``report`` (:meth:`solve`)."""
        info = report.solve
        if info is None:
            return 0
        scored = len(info.candidates) or (1 if info.validation is not None else 0)
        products = (1 + max(0, int(info.products))) * self.flops.product(report.subset_size)
        return products + scored * self.validation_samples * self.flops.forward

    def solve(self, report: EditReport) -> float:
        return self.coordinator.seconds(self.solve_flops(report))

    def local_update(self, sample_epochs: int, host_s: float, reused: bool = False) -> float:
        return 0.0 if reused else self.client.seconds(self.flops.train * sample_epochs)

    def describe(self) -> dict[str, Any]:
        return {
            "time_model": self.kind.value,
            "client_profile": self.client.as_dict(),
            "coordinator_profile": self.coordinator.as_dict(),
            "model": self.model,
            "input_shape": list(self.input_shape),
            "epochs": self.epochs,
            "validation_samples": self.validation_samples,
            "flops_per_sample": self.flops.as_dict(),  # forward, train (a sample-epoch), fisher
            "flops_per_product": self.flops.product(1),  # K-FAC: times the members summed
        }


class CalibratedTime(TimeModel):
    kind = TimeModelKind.CALIBRATED
    calibration: Calibration  # always given (the base class's None is for the other models)

    def __init__(self, epochs: int, fisher: bool, calibration: Calibration) -> None:
        super().__init__(epochs, fisher)
        self.calibration = calibration

    def contribution(self, samples: int, work: int | None, host_s: Callable[[], float] | None) -> float:
        cal = self.calibration
        if work is not None:
            return cal.train_s_per_sample_epoch * work
        return cal.client_seconds(samples, self.epochs, fisher=self.fisher)

    def solve(self, report: EditReport) -> float:
        return 0.0 if report.solve is None else self.calibration.solve_seconds(report.solve.products)

    def local_update(self, sample_epochs: int, host_s: float, reused: bool = False) -> float:
        return 0.0 if reused else self.calibration.train_s_per_sample_epoch * sample_epochs


class MeasuredTime(TimeModel):
    kind = TimeModelKind.MEASURED

    def contribution(self, samples: int, work: int | None, host_s: Callable[[], float] | None) -> float:
        if host_s is None:
            raise ValueError("the measured time model needs the host time of every job")
        return host_s()

    def solve(self, report: EditReport) -> float:
        return report.solve_s

    def local_update(self, sample_epochs: int, host_s: float, reused: bool = False) -> float:
        return host_s


class DeviceTime(TimeModel):
    kind = TimeModelKind.DEVICE

    def __init__(
        self, epochs: int, fisher: bool, per_sample_epoch: float, fisher_factor: float, per_solve_iteration: float
    ) -> None:
        super().__init__(epochs, fisher)
        self.per_sample_epoch, self.fisher_factor, self.per_solve_iteration = (
            per_sample_epoch,
            fisher_factor,
            per_solve_iteration,
        )

    def contribution(self, samples: int, work: int | None, host_s: Callable[[], float] | None) -> float:
        return self.per_sample_epoch * samples * (self.epochs + self.fisher_factor)

    def solve(self, report: EditReport) -> float:
        if report.solve is None:
            return report.solve_s
        return self.per_solve_iteration * max(1, report.solve.iterations)

    def local_update(self, sample_epochs: int, host_s: float, reused: bool = False) -> float:
        return 0.0 if reused else self.per_sample_epoch * sample_epochs


def _profile(scenario: Scenario, setup: OneShotSetup, epochs: int, fisher: bool) -> TimeModel:
    train, data = setup.train, setup.train_set
    shape = tuple(data.input_shape)
    flops = model_flops(setup.model, setup.model_fn, shape, data.num_classes, train.fisher, train.fisher_labels)
    c = scenario.compute
    return ProfileTime(
        epochs, fisher, flops, c.client_profile(), c.solver_profile(), len(setup.validation_set), setup.model, shape
    )


def _calibrated(scenario: Scenario, setup: OneShotSetup, epochs: int, fisher: bool) -> TimeModel:
    c = scenario.compute.calibration
    return CalibratedTime(epochs, fisher, pinned(c) if c is not None else calibrated(scenario.federated, setup))


def _measured(scenario: Scenario, setup: OneShotSetup, epochs: int, fisher: bool) -> TimeModel:
    return MeasuredTime(epochs, fisher)


def _device(scenario: Scenario, setup: OneShotSetup, epochs: int, fisher: bool) -> TimeModel:
    c = scenario.compute
    return DeviceTime(epochs, fisher, c.seconds_per_sample_epoch, c.fisher_factor, c.seconds_per_solve_iteration)


TIME_MODELS: Registry[Callable[[Scenario, OneShotSetup, int, bool], TimeModel]] = Registry(
    "time model",
    {
        TimeModelKind.PROFILE.value: _profile,
        TimeModelKind.CALIBRATED.value: _calibrated,
        TimeModelKind.MEASURED.value: _measured,
        TimeModelKind.DEVICE.value: _device,
    },
)


def time_model(scenario: Scenario, setup: OneShotSetup) -> TimeModel:
    """The scenario's time model (a calibrated one measures or loads its costs here, once)."""
    train = setup.train
    return TIME_MODELS[scenario.compute.time_model.value](scenario, setup, train.epochs, train.fisher.value != "none")
