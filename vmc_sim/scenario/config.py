"""Configuration as data: YAML files validated into typed objects before anything runs.

A bad file is refused with the file name, the field path and the reason, e.g.
``scenario.yaml: federated.train.epochs: Input should be greater than 0``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import fields as dc_fields
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fl_core.augment import Augment
from fl_core.editors import EDITORS, editor_options
from fl_core.fisher import FisherKind
from fl_core.fisher.base import FisherLabels, Preconditioner
from fl_core.partition import DirichletScheme
from fl_core.projection import DEFAULT_DAMPINGS, ProjectionConfig, ProjectionMethod
from fl_core.sampler import FixedRatio, FixedSize, SizeRule
from fl_core.stats import Weighting
from fl_core.training import DTYPES, TrainConfig
from mobility.yaml_text import load_yaml

from .errors import ConfigError


class Strict(BaseModel):
    """A configuration section: unknown keys refused, frozen, and every number finite (NaN and
    +-inf, also given as strings such as "inf", are refused: they would pass a bound such as
    ``gt=0`` or fail with a misleading one, and break the run far from the key)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


NOT_FINITE = "must be a finite number, got {}"
"""The message for a NaN or infinite number, with the value as the user wrote it."""


def _shown(v: Any) -> str:
    return v if isinstance(v, str) else repr(float(v))


def not_finite(v: Any) -> bool:
    """True for a NaN or infinite float, or a string that reads as one ("inf", "-Infinity", "nan")."""
    if isinstance(v, float):
        return not math.isfinite(v)
    if isinstance(v, str):
        try:
            return not math.isfinite(float(v))
        except ValueError:
            return False
    return False


def check_finite(value: Any, where: str = "", numeric_strings: bool = True) -> None:
    """Raise ValueError naming the first NaN or infinite number in ``value`` (nested mappings and
    lists walked), as ``<where>: must be a finite number, got inf``; strings count only when
    ``numeric_strings`` (the place takes a number)."""
    if isinstance(value, dict):
        for k, v in value.items():
            check_finite(v, f"{where}.{k}" if where else str(k), numeric_strings)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_finite(v, f"{where}[{i}]", numeric_strings)
    elif not_finite(value) and (numeric_strings or not isinstance(value, str)):
        msg = NOT_FINITE.format(_shown(value))
        raise ValueError(f"{where}: {msg}" if where else msg)


def _numeric(annotation: Any) -> bool:
    """True for a dataclass field's type that takes a number (``float``, ``int | None``, ...)."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    return any(t in text for t in ("float", "int")) and "str" not in text


def dataclass_checker(cls: type, section: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A validator for a section given as a mapping that a lower layer's dataclass ``cls`` takes:
    unknown keys are refused with the keys it has, a NaN or infinite number is refused naming its
    key, and building ``cls`` raises its own error."""
    names = {f.name for f in dc_fields(cls)}
    numeric = {f.name for f in dc_fields(cls) if _numeric(f.type)}

    def check(value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - names)
        if unknown:
            raise ValueError(f"unknown field(s) {unknown}; {section} takes {sorted(names)}")
        for k, v in value.items():
            check_finite(v, str(k), numeric_strings=k in numeric)
        cls(**value)  # raises ValueError naming the bad field
        return value

    return check


class TrainSection(Strict):
    epochs: int = Field(50, gt=0, description="local epochs K")
    lr: float = Field(0.01, gt=0, description="local SGD learning rate")
    batch_size: int = Field(64, gt=0, description="local mini-batch")
    momentum: float = Field(0.9, ge=0, lt=1, description="SGD momentum (seed 000 / FedFisher: 0.9)")
    augment: Augment = Field(
        Augment.NONE,
        description="none, or crop_flip (FedFisher's CIFAR recipe: random crop of "
        "the 4-pixel padded image, horizontal flip)",
    )
    fisher: FisherKind = Field(FisherKind.KFAC, description="diagonal, kfac, full or none")
    fisher_batch: int = Field(128, gt=0, description="samples per Fisher batch")
    fisher_labels: FisherLabels = Field(
        FisherLabels.EXPECTED,
        description="sampled (one drawn label per input) or "
        "expected (every class at its probability, as FedFisher's code)",
    )
    upload_dtype: str = Field("float32", description="float32, float16 or bfloat16")
    fisher_rank: int | None = Field(
        None,
        gt=0,
        description="K-FAC uploads as top-r eigenpairs per factor (seed 000's compression); null = whole factors",
    )
    device: str = Field("cpu", description="cpu, cuda or auto")
    threads: int | None = Field(None, gt=0, description="torch threads; null = 1 for small models")

    @field_validator("upload_dtype")
    @classmethod
    def _dtype(cls, v: str) -> str:
        if v not in DTYPES:
            raise ValueError(f"must be one of {sorted(DTYPES)}")
        return v

    @model_validator(mode="after")
    def _rank_needs_kfac(self) -> TrainSection:
        if self.fisher_rank is not None and self.fisher is not FisherKind.KFAC:
            raise ValueError(f"fisher_rank compresses K-FAC uploads; fisher is {self.fisher.value!r}")
        return self

    def build(self) -> TrainConfig:
        return TrainConfig(**self.model_dump())


class ProjectionSection(Strict):
    """The merge (``fl_core.projection``): damping selected on the server's validation set."""

    method: ProjectionMethod = Field(
        ProjectionMethod.AUTO,
        description="auto (closed form for diagonal, else CG on F), closed_form, cg_f, cg_f2, adam",
    )
    tol: float = Field(1e-6, gt=0, description="relative residual at which a CG solve stops")
    max_iter: int = Field(1000, gt=0, description="CG iterations at most (a solve stopped here is reported)")
    damping: float = Field(1e-4, ge=0, description="fixed relative damping when no validation set selects one")
    dampings: list[float | Literal["mean"]] = Field(
        default_factory=lambda: ["mean" if math.isinf(d) else d for d in DEFAULT_DAMPINGS],
        min_length=1,
        description="candidate relative dampings selected on the validation set ('mean': the weighted mean)",
    )
    weighting: Weighting = Field(Weighting.SAMPLES, description="members weighted by sample count, or uniformly")
    precondition: bool = Field(True, description="precondition CG on F (per layer)")
    preconditioner: Preconditioner = Field(Preconditioner.KRONECKER, description="per-layer CG preconditioner")
    warm_start: bool = Field(True, description="start CG from the previous solve")
    fast_products: bool = Field(True, description="float32 K-FAC products, finished in float64")
    curvature_floor: float = Field(1e-12, ge=0, description="curvature below this is zero")
    adam_lr: float = Field(1e-3, gt=0, description="method adam (FedFisher's server loop) only")
    check_every: int = Field(100, gt=0, description="method adam: validation check interval")
    iterates: list[Annotated[int, Field(gt=0)]] = Field(
        default_factory=list,
        description="methods cg_f/cg_f2: CG iterates selected on the validation set "
        "(early stopping at the fixed damping) instead of the dampings",
    )
    device: Literal["cpu", "cuda", "auto"] | None = Field(
        None, description="where a K-FAC solve's float32 products run; null = as federated.train.device"
    )

    @field_validator("dampings")
    @classmethod
    def _dampings(cls, v: list[float]) -> list[float]:
        if any(d != "mean" and not 0 <= d < math.inf for d in v):
            raise ValueError("every damping must be a finite number >= 0, or 'mean' (the weighted mean)")
        return v

    def build(self, device: str = "cpu") -> ProjectionConfig:
        """The merge's config; ``device`` is used where this section names none."""
        d = self.model_dump()
        d["dampings"] = tuple(math.inf if x == "mean" else x for x in d["dampings"])
        d["iterates"] = tuple(d["iterates"])
        d["device"] = d["device"] or device
        return ProjectionConfig(**d)


def strategy_names() -> list[str]:
    """Every multi-round strategy name ``fl_core.rounds.build_strategy`` knows."""
    from fl_core.rounds import STRATEGIES

    return STRATEGIES.names()


class RoundsSection(Strict):
    """Multi-round strategies in the co-simulation: local training, sampling, the server, pacing."""

    rounds: int | None = Field(None, gt=0, description="stop after this many rounds; null = until traffic ends")
    clients_per_round: int = Field(10, gt=0, description="participants drawn per round")
    min_available: int = Field(2, gt=0, description="vehicles in coverage needed to open a round")
    interval: float = Field(0.0, ge=0, description="simulated seconds from one round's start to the next (at least)")
    local_epochs: int = Field(1, gt=0, description="epochs per round")
    lr: float = Field(0.01, gt=0, description="local learning rate")
    batch_size: int = Field(32, gt=0, description="local mini-batch")
    momentum: float = Field(0.0, ge=0, lt=1, description="local SGD momentum")
    prox_mu: float = Field(0.01, gt=0, description="FedProx proximal weight (fedprox only; 0 would be fedavg)")
    server_lr: float = Field(1.0, gt=0, description="server step size")
    weighted: bool = Field(True, description="aggregate weighted by sample count")
    unlearn_on_departure: bool = Field(
        True, description="strategies that can unlearn (pdf) forget departing participants"
    )

    def build(self):
        """The :class:`fl_core.rounds.RoundConfig` of this section."""
        from fl_core.rounds import RoundConfig

        return RoundConfig(
            rounds=self.rounds or 1,
            clients_per_round=self.clients_per_round,
            local_epochs=self.local_epochs,
            lr=self.lr,
            batch_size=self.batch_size,
            momentum=self.momentum,
            prox_mu=self.prox_mu,
            server_lr=self.server_lr,
            weighted=self.weighted,
        )


class ShardAssignment(str, Enum):
    """How a vehicle of a co-simulation gets its data shard (see :class:`vmc_sim.scenario.shards.ShardAssignment`)."""

    HASH = "hash"
    ARRIVAL = "arrival"


class FederatedSection(Strict):
    """Who holds which data, the model, local training and the methods to compare."""

    dataset: str = Field(
        "digits",
        description="digits (built in), mnist, fashion_mnist, femnist, cifar10, cifar100, svhn, emnist[-split]",
    )
    data_root: str | None = Field(
        None, description="where dataset files are (null: $VMC_DATA, ../shared/data, torchvision folders)"
    )
    num_clients: int = Field(12, gt=0, description="data shards; client i holds shard i")
    shard_assignment: ShardAssignment = Field(
        ShardAssignment.HASH,
        description="co-simulation: hash (a vehicle holds shard hash(seed, id) mod num_clients: two vehicles "
        "may share one) or arrival (the k-th vehicle to become a client holds shard k: no two share; a run "
        "with more clients than num_clients stops naming it)",
    )
    alpha: float | None = Field(0.5, gt=0, description="Dirichlet label skew; null = by writer")
    scheme: DirichletScheme = Field(
        DirichletScheme.PER_CLASS,
        description="per_class: a Dirichlet over clients per class; per_client: over classes per client",
    )
    validation_samples: int = Field(500, ge=0, description="held out for the server's merge selection (at most 10 %)")
    model: str = Field(
        "mlp",
        description="a model of fl_core.models.MODELS: mlp (one hidden layer of 32), cnn (the paper's), resnet18, or one of your own",
    )
    max_train_samples: int | None = Field(None, gt=0, description="a random slice of the training set (null: all)")
    max_test_samples: int | None = Field(None, gt=0, description="the first N test images (null: all)")
    rho: float | None = Field(None, gt=0, le=1, description="fixed ratio P_t = floor(rho M(t)); default 0.5")
    subset_size: int | None = Field(None, gt=0, description="fixed P (theory); excludes rho")
    methods: list[str] = Field(
        default_factory=lambda: ["fsosa", "retrain"],
        description="editors: one-shot methods driven by join/leave requests",
    )
    strategies: list[str] = Field(
        default_factory=list, description="multi-round strategies driven by the vehicles in coverage"
    )
    editor_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="per method of methods, its own options (e.g. fedrr: {lr: 0.02}), checked by the editor's "
        "options class (fl_core.editors: FedLPAConfig, DenseConfig, FedEraserConfig, FedRRConfig, FATSConfig, "
        "FineTuneConfig)",
    )
    train: TrainSection = TrainSection()
    projection: ProjectionSection = ProjectionSection()
    rounds: RoundsSection = RoundsSection()

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        from fl_core.models import MODELS

        return MODELS.canonical(v)  # an unknown one is refused naming the models there are

    @field_validator("dataset")
    @classmethod
    def _dataset(cls, v: str) -> str:
        from fl_core.data import _spec

        _spec(v)  # raises "unknown dataset ...; known datasets: ..." before any data or SUMO is touched
        return v

    @field_validator("methods")
    @classmethod
    def _methods(cls, v: list[str]) -> list[str]:
        for m in v:
            if m not in EDITORS:
                raise ValueError(f"unknown method {m!r}; choose from {list(EDITORS)}")
        return v

    @field_validator("strategies")
    @classmethod
    def _strategies(cls, v: list[str]) -> list[str]:
        known = strategy_names()
        for m in v:
            if m not in known:
                raise ValueError(f"unknown multi-round strategy {m!r}; choose from {known}")
        return v

    @model_validator(mode="after")
    def _size_rule(self) -> FederatedSection:
        if self.subset_size is not None and self.rho is not None:
            raise ValueError("give either rho (fixed ratio) or subset_size (fixed P), not both")
        if not self.methods and not self.strategies:
            raise ValueError("name at least one method or strategy")
        for name, options in self.editor_options.items():
            if name not in self.methods:
                raise ValueError(f"editor_options.{name}: {name!r} is not in methods {self.methods}")
            for key, value in options.items():
                check_finite(value, f"editor_options.{name}.{key}")
            editor_options(name, options)  # the editor's options class refuses a bad value naming it
        return self

    def options_for(self, method: str) -> Any:
        """Method ``method``'s typed options (its editor's options class), or None for its defaults."""
        options = self.editor_options.get(method)
        return None if options is None else editor_options(method, options)

    def setup(self, seed: int):
        """The shared federated setup (data, partition, W0) this section describes."""
        from fl_core.experiment import OneShotSetup

        return OneShotSetup(
            dataset=self.dataset,
            num_clients=self.num_clients,
            alpha=self.alpha,
            model=self.model,
            seed=seed,
            train=self.train.build(),
            max_train_samples=self.max_train_samples,
            max_test_samples=self.max_test_samples,
            data_root=self.data_root,
            scheme=self.scheme,
            validation_samples=self.validation_samples,
        )

    def projection_config(self) -> ProjectionConfig:
        """The merge's config, its solve on the training device unless ``projection.device`` says otherwise."""
        return self.projection.build(device=self.train.device)

    def rule(self) -> SizeRule:
        if self.subset_size is not None:
            return FixedSize(self.subset_size)
        return FixedRatio(0.5 if self.rho is None else self.rho)


class OneShotConfig(Strict):
    """``vmc oneshot``: fit on an initial client set, then replay an editing sequence."""

    name: str = "oneshot"
    seed: int = Field(0, ge=0)
    federated: FederatedSection = FederatedSection()
    initial_clients: int = Field(8, gt=0)
    requests: list[str] = Field(
        default_factory=lambda: ["+8", "-2", "+9", "-5", "+10", "-0", "-9,+11"],
        description="'+i' adds client i, '-i' removes it; comma-joined = one batch",
    )

    @model_validator(mode="after")
    def _check(self) -> OneShotConfig:
        n = self.federated.num_clients
        if self.initial_clients > n:
            raise ValueError(f"initial_clients ({self.initial_clients}) exceeds federated.num_clients ({n})")
        clients = set(range(self.initial_clients))
        for i, r in enumerate(self.requests):  # the whole sequence against the client set it meets
            where = f"requests[{i}] ({r!r})"
            removed, added = parse_request(r, n, where=where)
            for c in {c for c in removed if removed.count(c) > 1} | {c for c in added if added.count(c) > 1}:
                raise ValueError(f"{where}: client {c} is listed twice")
            for c in removed:
                if c not in clients:
                    raise ValueError(f"{where}: client {c} is not in the client set at that point")
            for c in added:
                if c in clients or c in removed:
                    raise ValueError(f"{where}: client {c} is already in the client set at that point")
            clients = (clients - set(removed)) | set(added)
            if not clients:
                raise ValueError(f"{where}: the request would leave no client")
        return self


def parse_request(text: str, num_clients: int, where: str = "request") -> tuple[list[int], list[int]]:
    """``'-3,+12'`` -> (removed [3], added [12]); raises naming ``where`` on bad input."""
    removed: list[int] = []
    added: list[int] = []
    for part in text.replace(" ", "").split(","):
        if len(part) < 2 or part[0] not in "+-" or not part[1:].isdigit():
            raise ValueError(f"{where}: {part!r} is not '+<client>' or '-<client>'")
        c = int(part[1:])
        if c >= num_clients:
            raise ValueError(f"{where}: client {c} has no data (federated.num_clients = {num_clients})")
        (added if part[0] == "+" else removed).append(c)
    return removed, added


def section_fields(cls: type[BaseModel], loc: tuple) -> list[str] | None:
    """The field names of the section of ``cls`` at ``loc`` (a path of field names), if it is a model."""
    model: Any = cls
    for part in loc:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return None
        model = field.annotation
        for arg in getattr(model, "__args__", ()):  # X | None
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                model = arg
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return None


def format_errors(err: ValidationError, source: str, cls: type[BaseModel] | None = None) -> str:
    """One line per error: ``source: field.path: message``; an unknown key lists the section's keys."""
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "<top>"
        msg = e["msg"]
        if e["type"] == "finite_number" or e["type"] == "int_parsing" and not_finite(e["input"]):
            msg = NOT_FINITE.format(_shown(e["input"]))
        elif e["type"] == "value_error":  # a key inside a mapping section: name it in the path
            key, sep, rest = str(e.get("ctx", {}).get("error", "")).partition(": " + NOT_FINITE.format(""))
            if sep and key:
                loc, msg = f"{loc}.{key}", NOT_FINITE.format(rest)
        if e["type"] == "extra_forbidden" and cls is not None:
            section = ".".join(str(p) for p in e["loc"][:-1]) or "the top level"
            names = section_fields(cls, tuple(e["loc"][:-1]))
            if names is not None:
                msg = f"unknown key; {section} takes {', '.join(names)}"
        lines.append(f"{source}: {loc}: {msg}")
    return "\n".join(lines)


def _format(err: ValidationError, source: str, cls: type[BaseModel] | None = None) -> str:
    return format_errors(err, source, cls)


def load_model(
    cls: type[BaseModel], path: str | Path | None, data: dict[str, Any] | None = None, what: str = "configuration file"
):
    """Validate ``path`` (YAML) or ``data`` into ``cls``; raise :class:`ConfigError` naming fields.

    A file that holds nothing (no bytes, or only comments and blank lines) is refused: it reads
    as an accident, not as "every default" (an explicit ``{}`` says that, as does running without a file)."""
    source = str(path) if path else "<embedded default>"
    if path is not None:
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise ConfigError(f"{source}: cannot read ({e.strerror})") from None
        try:
            data = load_yaml(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"{source}: not valid YAML: {e}") from None
        if data is None:
            raise ConfigError(
                f"{what} {source} is empty; write at least one key, or run without a file for the default"
            )
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: the top level must be a mapping of fields")
    try:
        return cls.model_validate(data or {})
    except ValidationError as e:
        raise ConfigError(_format(e, source, cls)) from None
