"""The local optimizer: SGD with heavy-ball momentum.

The same update as ``torch.optim.SGD(params, lr, momentum)`` (no dampening, weight decay or
Nesterov), bit for bit on CPU: ``buf = g`` on the first step, then ``buf = momentum * buf + g``,
and ``p -= lr * buf``. It is its own class because constructing any ``torch.optim`` optimizer
imports ``torch._dynamo``, 1.3-1.8 s of every process that trains (the CLI, each sweep or case
study worker, every quick-size script a test starts)."""

from __future__ import annotations

from collections.abc import Iterable

import torch


class MomentumSGD:
    """SGD with momentum over ``params``; :meth:`zero_grad` and :meth:`step` as torch's optimizers.

    Keeping one instance across calls keeps its momentum buffers, so training continued in
    several calls equals one call of the same total length."""

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, momentum: float = 0.0) -> None:
        if lr < 0 or momentum < 0:
            raise ValueError(f"SGD needs lr >= 0 and momentum >= 0, got lr={lr}, momentum={momentum}")
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.momentum = float(lr), float(momentum)
        self._buffers: list[torch.Tensor | None] = [None] * len(self.params)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        for i, p in enumerate(self.params):
            g = p.grad
            if g is None:
                continue
            if self.momentum != 0:
                buf = self._buffers[i]
                if buf is None:
                    buf = self._buffers[i] = g.detach().clone()
                else:
                    buf.mul_(self.momentum).add_(g, alpha=1.0)
                g = buf
            p.add_(g, alpha=-self.lr)
