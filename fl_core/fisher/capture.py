"""Per-layer activations and output gradients for the true Fisher.

Labels come from the model's own predictive distribution (the true Fisher, not the empirical
one): one drawn label per input, or every class weighted by its probability
(:class:`~fl_core.fisher.base.FisherLabels`). Forward hooks record, for every Linear/Conv2d
layer, the layer inputs ``a`` (unfolded patches for convolutions) and its output; the gradients
``g`` of the negative log-likelihood with respect to those outputs, one set per label draw, are
then taken in one batched backward pass (the call ``torch.autograd.grad`` makes: :func:`_vjp`). Every
representation is computed from these.
A model that changes a layer's output in place, or calls one layer twice in a forward pass, is
refused (the gradients would be those of another function).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .base import FisherLabels


@dataclass(frozen=True)
class LayerSpec:
    """Where a layer's weight sits in the flat parameter vector, as an (out, in) matrix."""

    name: str
    offset: int
    out_features: int
    in_features: int

    @property
    def size(self) -> int:
        return self.out_features * self.in_features


def layer_specs(model: nn.Module) -> list[LayerSpec]:
    """The layout of ``model``; raises if a parameter is outside a bias-free Linear/Conv2d."""
    owner = {}
    for name, mod in model.named_modules():
        if isinstance(mod, (nn.Linear, nn.Conv2d)):
            if mod.bias is not None:
                raise ValueError(f"layer {name!r} has a bias; Fisher representations need bias-free layers")
            if isinstance(mod, nn.Conv2d) and mod.groups != 1:
                raise ValueError(f"layer {name!r} is a grouped convolution, which is not supported")
            owner[id(mod.weight)] = (name, mod)
    specs, offset = [], 0
    for pname, p in model.named_parameters():
        if id(p) not in owner:
            raise ValueError(f"parameter {pname!r} is not the weight of a Linear/Conv2d layer")
        name, mod = owner[id(p)]
        specs.append(LayerSpec(name, offset, p.shape[0], p.numel() // p.shape[0]))
        offset += p.numel()
    return specs


@dataclass
class LayerBatch:
    """One batch of one layer: ``a`` is (N, in, L) and ``g`` is (S, N, out, L) (L = positions, S =
    label draws per input: 1 drawn label, or C classes each scaled by the square root of its
    probability, so that summing ``g g^T`` over S gives the expectation over labels)."""

    spec: LayerSpec
    a: torch.Tensor
    g: torch.Tensor


def iterate_layer_batches(
    model: nn.Module,
    x: torch.Tensor,
    batch_size: int,
    generator: torch.Generator,
    labels: FisherLabels | str = FisherLabels.EXPECTED,
) -> Iterator[list[LayerBatch]]:
    """Yield, per mini-batch of ``x``, the captured (a, g) of every layer in flat order.
    ``labels`` sampled draws one label per input from ``generator``; expected uses no draw.

    The gradients are taken with respect to the layer outputs only (no weight gradients), and
    for expected labels all C cotangents go through one batched backward pass
    (``is_grads_batched``) instead of C passes (the git history of bench/RESULTS.md, "The expected-label Fisher in
    one backward pass")."""
    labels = FisherLabels(labels)
    specs = layer_specs(model)
    modules = dict(model.named_modules())
    store: dict[str, tuple[torch.Tensor, torch.Tensor, int]] = {}
    handles = []
    batched = [True]  # cleared for the rest of the call if an operator has no batching rule

    def make_hook(name: str, mod: nn.Module):
        def hook(_m, inputs, output):
            if name in store:
                raise ValueError(
                    f"layer {name!r} runs twice in one forward pass; the Fisher needs each "
                    "Linear/Conv2d layer applied once"
                )
            inp = inputs[0].detach()
            if isinstance(mod, nn.Conv2d):
                a = F.unfold(inp, mod.kernel_size, mod.dilation, mod.padding, mod.stride)
            else:
                a = inp.unsqueeze(-1)
            store[name] = (a, output, output._version)

        return hook

    for spec in specs:
        handles.append(modules[spec.name].register_forward_hook(make_hook(spec.name, modules[spec.name])))
    was_training = model.training
    model.eval()
    try:
        for start in range(0, x.shape[0], batch_size):
            xb = x[start : start + batch_size]
            store.clear()
            with torch.enable_grad():
                logits = model(xb)
            for s in specs:
                if store[s.name][1]._version != store[s.name][2]:
                    raise ValueError(
                        f"the model changes the output of layer {s.name!r} in place (e.g. an "
                        "inplace ReLU right after it); the Fisher needs that output unchanged"
                    )
            outputs = [store[s.name][1] for s in specs]
            cotangents = _cotangents(logits, labels, generator)
            grads = _output_grads(logits, outputs, cotangents, batched)
            layers = [
                LayerBatch(s, store[s.name][0], g.reshape(g.shape[0], g.shape[1], g.shape[2], -1))
                for s, g in zip(specs, grads, strict=True)
            ]
            store.clear()  # the forward graph goes before the caller works on the batch
            del outputs, grads, logits, cotangents
            yield layers
    finally:
        for h in handles:
            h.remove()
        store.clear()
        model.train(was_training)


def _cotangents(logits: torch.Tensor, labels: FisherLabels, generator: torch.Generator) -> torch.Tensor:
    """(S, N, C) gradients of the negative log-likelihood with respect to the logits: ``p - e_y``
    for one drawn label, or ``sqrt(p_c) (p - e_c)`` for every class c (so that summing squares over
    S gives the expectation over labels)."""
    with torch.no_grad():
        probs = torch.softmax(logits.double(), dim=1)
        classes = logits.shape[1]
        if labels is FisherLabels.SAMPLED:
            # drawn on the CPU from the CPU stream, so a CUDA model samples the labels a CPU model would
            y = torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(1).to(logits.device)
            v = (probs - F.one_hot(y, classes).to(probs.dtype)).unsqueeze(0)
        else:
            eye = torch.eye(classes, dtype=probs.dtype, device=probs.device)
            v = probs.sqrt().T.unsqueeze(-1) * (probs.unsqueeze(0) - eye.unsqueeze(1))
    return v.to(logits.dtype)


def _output_grads(
    logits: torch.Tensor, outputs: list[torch.Tensor], cotangents: torch.Tensor, batched: list[bool]
) -> list[torch.Tensor]:
    """Each layer output's gradient for every cotangent, stacked as (S, N, ...). Several
    cotangents go through one batched backward pass while ``batched[0]``; if an operator has no
    batching rule, a warning says so once and this call goes on with one pass per cotangent
    (the same values to float rounding)."""
    if cotangents.shape[0] == 1:
        return [g.unsqueeze(0) for g in _vjp(logits, outputs, cotangents[0], retain_graph=False, batched=False)]
    if batched[0]:
        try:
            return _vjp(logits, outputs, cotangents, retain_graph=True, batched=True)
        except torch.cuda.OutOfMemoryError:
            raise
        except RuntimeError as e:
            batched[0] = False
            warnings.warn(
                f"the Fisher's batched backward pass failed ({str(e).splitlines()[0][:200]}); "
                "this pass goes on with one backward pass per class, slower",
                RuntimeWarning,
                stacklevel=3,
            )
    per = [
        torch.autograd.grad(logits, outputs, v, retain_graph=k < len(cotangents) - 1) for k, v in enumerate(cotangents)
    ]
    return [torch.stack(gs) for gs in zip(*per, strict=True)]


def _vjp(
    logits: torch.Tensor, outputs: list[torch.Tensor], v: torch.Tensor, retain_graph: bool, batched: bool
) -> list[torch.Tensor]:
    """``torch.autograd.grad(logits, outputs, v, ..., is_grads_batched=batched)``: the same engine
    call under the same vmap, without the public call's check of ``v``'s shape, whose first use
    imports torch's symbolic-shapes module and sympy (0.3 s a process; bench/RESULTS.md, "Start-up").
    ``v`` is built here with ``logits``' shape, so the check has nothing to find. A torch whose
    internals differ (older releases lack them) gets the public call."""
    if tuple(v.shape[int(batched) :]) != tuple(logits.shape):
        raise ValueError(f"cotangents of shape {tuple(v.shape)} for logits of shape {tuple(logits.shape)}")
    inputs = tuple(outputs)
    try:
        from torch._vmap_internals import _vmap
        from torch.autograd.graph import _engine_run_backward

        def run(g: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return _engine_run_backward((logits,), (g,), retain_graph, False, inputs, False, accumulate_grad=False)

        return list(_vmap(run, 0, 0, allow_none_pass_through=True)(v) if batched else run(v))
    except (ImportError, TypeError):  # pragma: no cover - another torch's internals: the public call
        return list(torch.autograd.grad(logits, outputs, v, retain_graph=retain_graph, is_grads_batched=batched))
