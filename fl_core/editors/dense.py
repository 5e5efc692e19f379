"""DENSE (Zhang et al., NeurIPS 2022, "DENSE: data-free one-shot federated learning"), a one-shot
baseline of seed 000's Tables II/III.

Every client trains K epochs from W0 (the pool's trainer) and uploads its model. The server,
without data, alternates two stages for ``rounds`` rounds:

1. Data generation: each round draws a batch of latent codes z and class labels y, and the
   generator G (kept from round to round) is trained together with the codes
   (``generator_steps`` Adam steps, as in the authors' code) so that the ensemble D (the mean
   of the client models' logits) is confident on x = G(z) and the synthetic data is diverse
   and hard for the global model S:
   ``loss = ce_weight * CE(D(x), y) + adv_weight * L_adv``, with y the drawn labels (the
   paper's one-hot term; ``TargetRule.ARGMAX`` uses D's own argmax instead, the DAFL form), and
   ``L_adv = -mean(1[argmax S = argmax D] * KL(D(x) || S(x)))``, which pushes G
   towards inputs on which S still disagrees with D in distribution while agreeing in class
   (the paper's boundary-support term). DENSE's third term, batch-norm statistics matching
   (DeepInversion), applies only to models with batch norm; none of the toolkit's models has
   any (they use no normalisation or parameter-free GroupNorm, and a flat upload carries no
   running statistics), so it is left out.
2. Distillation: each round's synthetic batch is kept with D's logits on it (the paper also
   keeps every synthesised batch); S, started from W0, takes ``distill_steps`` SGD steps of
   ``T^2 KL(softmax(D/T) || softmax(S/T))`` on mini-batches drawn from all kept batches.

Sizes. The DENSE authors' command (also used by FedLPA's comparison scripts) is 200 rounds of
30 generator steps on batches of 256 (z of dimension 256, generator width 64, Adam 1e-3,
betas (0.5, 0.999)) and one pass over the growing synthetic pool per round with batches of 64
(SGD lr 0.005, momentum 0.9, T = 20), all three loss weights 1. The defaults here are sized to
run in about a minute on MNIST with the two-layer CNN, 20 clients, on two CPU cores: 20 rounds
of 5 generator steps on batches of 64 and 25 distillation steps. The generator is DCGAN-style
like DENSE's (linear, two upsample + conv + batch-norm + LeakyReLU stages, a conv to the
input channels and a final batch norm without affine parameters, since the toolkit's inputs
are standardised per channel); it resizes to any input shape.

Accounting: every client gets the W0 broadcast and uploads its weights (model upload, at the
upload precision); ``compute_s`` sums the clients' measured training time (DENSE computes no
curvature, so a Fisher the pool computed for other methods is not charged),
``max_client_compute_s`` is the slowest client, and ``solve_s`` the server's generator
training and distillation.

Edits: DENSE has no editing mechanism; every request reruns it on the new client set. Client
models are deterministic in (run seed, client id), so the pool hands back the weights computed
before, but each rerun is charged as the paper's rerun would be: one W0 broadcast, every
current client's training time and upload, and a full server run. The server keeps nothing
between requests.

Random streams: ``dense`` keyed by the sorted client list (generator initialisation, latent
draws and labels, distillation mini-batches), so a run is a deterministic function of the
run seed and the client set.
"""

from __future__ import annotations

import math
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from enum import Enum

import torch
import torch.nn.functional as F
from torch import nn

from ..clients import ClientPool
from ..contribution import Contribution
from ..models import flat_params, load_flat
from ..payload import ByteKind, control_size, serialized_size
from ..sampler import ordered
from .base import Editor, EditReport


class TargetRule(str, Enum):
    """What the generator's cross-entropy term aims at."""

    SAMPLED = "sampled"  # uniformly drawn class labels (DENSE)
    ARGMAX = "argmax"  # the ensemble's own argmax (DAFL's one-hot loss)


@dataclass(frozen=True)
class DenseConfig:
    """Server-side sizes and weights of DENSE (the paper's values in the module docstring)."""

    rounds: int = 20
    generator_steps: int = 5
    distill_steps: int = 25
    synthesis_batch: int = 64
    distill_batch: int = 64
    latent_dim: int = 64
    generator_width: int = 32
    generator_lr: float = 1e-3
    distill_lr: float = 0.01
    momentum: float = 0.9
    temperature: float = 20.0
    ce_weight: float = 1.0
    adv_weight: float = 1.0
    targets: TargetRule = TargetRule.SAMPLED

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", TargetRule(self.targets))
        for name in (
            "rounds",
            "generator_steps",
            "distill_steps",
            "synthesis_batch",
            "distill_batch",
            "latent_dim",
            "generator_width",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"dense.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("generator_lr", "distill_lr", "temperature"):
            if not getattr(self, name) > 0:
                raise ValueError(f"dense.{name} must be > 0, got {getattr(self, name)}")
        for name in ("momentum", "ce_weight", "adv_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"dense.{name} must be >= 0, got {getattr(self, name)}")


class Generator(nn.Module):
    """z -> an input of shape ``(c, h, w)``, standardised per channel by its last batch norm."""

    def __init__(self, latent_dim: int, shape: Sequence[int], width: int) -> None:
        super().__init__()
        c, h, w = (int(s) for s in shape)
        self.start = (2 * width, math.ceil(h / 4), math.ceil(w / 4))
        self.fc = nn.Linear(latent_dim, 2 * width * self.start[1] * self.start[2])
        self.body = nn.Sequential(
            nn.BatchNorm2d(2 * width),
            nn.Upsample(size=(math.ceil(h / 2), math.ceil(w / 2))),
            nn.Conv2d(2 * width, 2 * width, 3, padding=1, bias=False),
            nn.BatchNorm2d(2 * width),
            nn.LeakyReLU(0.2),
            nn.Upsample(size=(h, w)),
            nn.Conv2d(2 * width, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.LeakyReLU(0.2),
            nn.Conv2d(width, c, 3, padding=1),
            nn.BatchNorm2d(c, affine=False),
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.body(self.fc(z).view(z.shape[0], *self.start))


class Ensemble(nn.Module):
    """Mean of the client models' logits (frozen)."""

    def __init__(self, models: Sequence[nn.Module]) -> None:
        super().__init__()
        self.members = nn.ModuleList(models)
        for p in self.members.parameters():
            p.requires_grad_(False)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([m(x) for m in self.members]).mean(0)


def _kl(teacher_logits: torch.Tensor, student_logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Per-sample KL(softmax(t/T) || softmax(s/T))."""
    log_t = F.log_softmax(teacher_logits / temperature, dim=1)
    log_s = F.log_softmax(student_logits / temperature, dim=1)
    return (log_t.exp() * (log_t - log_s)).sum(1)


@dataclass
class DenseTrace:
    """What the last server run did: per-step losses and how far the student agrees with the
    ensemble on fresh synthetic samples."""

    generator_loss: list[float] = field(default_factory=list)
    generator_ce: list[float] = field(default_factory=list)
    generator_adv: list[float] = field(default_factory=list)
    distill_loss: list[float] = field(default_factory=list)
    synthetic_agreement: float = 0.0


def distill(
    ensemble: nn.Module,
    student: nn.Module,
    input_shape: Sequence[int],
    num_classes: int,
    config: DenseConfig,
    generator: torch.Generator,
) -> DenseTrace:
    """DENSE's server stage: train a generator against ``ensemble`` and distil the ensemble
    into ``student`` (in place) on the synthetic data; returns the losses."""
    trace = DenseTrace()
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gen = Generator(config.latent_dim, input_shape, config.generator_width)
    gen.train()
    opt_s = torch.optim.SGD(student.parameters(), lr=config.distill_lr, momentum=config.momentum)
    kept_x: list[torch.Tensor] = []
    kept_t: list[torch.Tensor] = []
    for _ in range(config.rounds):
        student.eval()
        for p in student.parameters():
            p.requires_grad_(False)
        z = torch.randn(config.synthesis_batch, config.latent_dim, generator=generator).requires_grad_(True)
        y = torch.randint(0, num_classes, (config.synthesis_batch,), generator=generator)
        opt_g = torch.optim.Adam([*gen.parameters(), z], lr=config.generator_lr, betas=(0.5, 0.999))
        for _ in range(config.generator_steps):
            x = gen(z)
            t_logits = ensemble(x)
            s_logits = student(x)
            target = y if config.targets is TargetRule.SAMPLED else t_logits.argmax(1).detach()
            ce = F.cross_entropy(t_logits, target)
            agree = (s_logits.argmax(1) == t_logits.argmax(1)).float()
            adv = -(_kl(t_logits, s_logits) * agree).mean()
            loss = config.ce_weight * ce + config.adv_weight * adv
            opt_g.zero_grad(set_to_none=True)
            loss.backward()
            opt_g.step()
            trace.generator_loss.append(float(loss.detach()))
            trace.generator_ce.append(float(ce.detach()))
            trace.generator_adv.append(float(adv.detach()))
        with torch.no_grad():
            x = gen(z)
            kept_x.append(x)
            kept_t.append(ensemble(x))
        for p in student.parameters():
            p.requires_grad_(True)
        student.train()
        pool_x, pool_t = torch.cat(kept_x), torch.cat(kept_t)
        for _ in range(config.distill_steps):
            idx = torch.randint(0, pool_x.shape[0], (min(config.distill_batch, pool_x.shape[0]),), generator=generator)
            loss = _kl(pool_t[idx], student(pool_x[idx]), config.temperature).mean() * config.temperature**2
            opt_s.zero_grad(set_to_none=True)
            loss.backward()
            opt_s.step()
            trace.distill_loss.append(float(loss.detach()))
    student.eval()
    with torch.no_grad():
        x = gen(torch.randn(max(256, config.synthesis_batch), config.latent_dim, generator=generator))
        trace.synthetic_agreement = float((student(x).argmax(1) == ensemble(x).argmax(1)).float().mean())
    for p in student.parameters():
        p.requires_grad_(True)
    return trace


class DenseEditor(Editor):
    """DENSE over all current clients; every request reruns it (see the module docstring)."""

    name = "dense"

    def __init__(self, pool: ClientPool, config: DenseConfig = DenseConfig(), name: str | None = None) -> None:
        super().__init__()
        if name:
            self.name = name
        self.pool = pool
        self.config = config
        self._w0_bytes = serialized_size({"weights": pool.trainer.w0})
        self.trace: DenseTrace | None = None

    @property
    def members(self) -> set[Hashable]:
        """Every current client contributes."""
        return set(self.clients)

    def _fit(self, clients: list[Hashable], report: EditReport) -> None:
        self.model, self.trace = self._run(clients, report)
        report.joined = tuple(ordered(clients))
        self.clients = set(clients)

    def _edit(self, removed: list[Hashable], added: list[Hashable], report: EditReport) -> None:
        report.charge(ByteKind.CONTROL, control_size({"removed": removed, "added": added}))
        clients = (self.clients - set(removed)) | set(added)
        self.model, self.trace = self._run(clients, report)
        report.left, report.joined = tuple(ordered(removed)), tuple(ordered(added))
        self.clients = clients
        for c in removed:
            self.pool.forget(c)

    def _run(self, clients, report: EditReport) -> tuple[torch.Tensor, DenseTrace]:
        """One full DENSE run on ``clients``: broadcast, local training, server distillation."""
        dim = self.pool.trainer.w0.numel()
        members = ordered(clients)
        uploads: list[Contribution] = []
        for c in members:
            contribution = self.pool.train(c).model_only()
            contribution.validate(dim)
            uploads.append(contribution)
        report.charge(ByteKind.BROADCAST, self._w0_bytes, None)
        for u in uploads:
            report.charge(ByteKind.MODEL_UPLOAD, u.model_bytes, u.client)
            report.compute_s += u.train_s
            report.max_client_compute_s = max(report.max_client_compute_s, u.train_s)
        t0 = time.perf_counter()
        model, trace = self.server(uploads, self.pool.trainer.streams.torch("dense", tuple(members)))
        report.solve_s = time.perf_counter() - t0
        report.trained = tuple(members)
        report.subset_size = len(members)
        report.triggered = True
        return model, trace

    def server(self, uploads: Sequence[Contribution], generator: torch.Generator) -> tuple[torch.Tensor, DenseTrace]:
        """The distilled global model (flat, float32) from the clients' uploaded weights."""
        fn = self.pool.trainer.model_fn
        ensemble = Ensemble([load_flat(fn(), u.weights.float()) for u in uploads])
        student = load_flat(fn(), self.pool.trainer.w0)
        data = self.pool.data_of(uploads[0].client)  # the input shape and class count are public
        trace = distill(ensemble, student, data.input_shape, data.num_classes, self.config, generator)
        return flat_params(student), trace
