"""Two of ``torch.optim``'s updates written out, for the lessons that train a few tensors.

- ``sgd_step(parameters, lr)``: plain SGD, p <- p - lr * p.grad, then the gradients cleared;
- ``Adam(parameters, lr, betas, eps)``: Adam (Kingma and Ba, 2015, "Adam: A Method for Stochastic
  Optimization", Algorithm 1) with ``zero_grad()`` and ``step()``.

Each gives the same numbers as ``torch.optim.SGD`` / ``torch.optim.Adam`` with the same settings
(no momentum, weight decay or amsgrad; tensors on the CPU), bit for bit: the same tensor
operations in the same order (``tests/test_optimizers.py`` compares them step by step). They
exist for two reasons: a lesson can point at the dozen lines that make the update, and a
process that never touches ``torch.optim`` does not pay its first use, which imports torch's
compiler (about 2 s on the course's machines) although nothing is compiled.
"""

from __future__ import annotations

import torch

from utils.i18n import _


def _checked_parameters(parameters) -> list:
    parameters = list(parameters)
    if not parameters or not all(isinstance(p, torch.Tensor) for p in parameters):
        raise ValueError(_("pass the tensors to train (e.g. model.parameters()), got {found}").format(
            found=[type(p).__name__ for p in parameters]))             # [] when empty
    return parameters


def _checked_rate(lr) -> float:
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
        raise ValueError(_("learning rate lr must be > 0, got {lr}; pass e.g. lr=0.5").format(lr=lr))
    return float(lr)


def sgd_step(parameters, lr: float) -> None:
    """One step of plain SGD, then the gradients cleared: p <- p - lr * p.grad for each parameter
    that has a gradient (``torch.optim.SGD(parameters, lr)``'s ``step()``, then ``zero_grad()``)."""
    lr = _checked_rate(lr)
    with torch.no_grad():
        for p in _checked_parameters(parameters):
            if p.grad is not None:
                p.add_(p.grad, alpha=-lr)                          # p - lr * grad, in place
                p.grad = None


class Adam:
    """Adam with ``torch.optim.Adam``'s defaults: betas (0.9, 0.999), eps 1e-8.

    For each parameter with a gradient g, at its step t = 1, 2, ...:
    m <- beta1 m + (1 - beta1) g,  v <- beta2 v + (1 - beta2) g²,
    p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
    A gradient far smaller than eps moves p by almost nothing, however many steps it takes.
    """

    def __init__(self, parameters, lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8):
        self.parameters = _checked_parameters(parameters)
        self.lr = _checked_rate(lr)
        if len(betas) != 2 or not all(0 <= beta < 1 for beta in betas):
            raise ValueError(_("betas must be two numbers in [0, 1), got {betas!r}; pass e.g. "
                               "betas=(0.9, 0.999)").format(betas=betas))
        if not eps >= 0:
            raise ValueError(_("eps must be >= 0, got {eps!r}; pass e.g. eps=1e-8").format(eps=eps))
        self.beta1, self.beta2 = (float(beta) for beta in betas)
        self.eps = float(eps)
        self.steps = [0] * len(self.parameters)                  # t of each parameter
        self.m = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.parameters]
        self.v = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.parameters]

    def zero_grad(self) -> None:
        for p in self.parameters:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        for i, p in enumerate(self.parameters):
            if p.grad is None:
                continue                                         # no gradient: no step, t stays
            self.steps[i] += 1
            t, grad, m, v = self.steps[i], p.grad, self.m[i], self.v[i]
            m.lerp_(grad, 1 - self.beta1)                        # beta1 m + (1 - beta1) g
            v.mul_(self.beta2).addcmul_(grad, grad, value=1 - self.beta2)
            step_size = self.lr / (1 - self.beta1 ** t)
            denominator = (v.sqrt() / (1 - self.beta2 ** t) ** 0.5).add_(self.eps)
            p.addcdiv_(m, denominator, value=-step_size)
