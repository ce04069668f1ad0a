"""utils.optimizers: torch.optim's SGD and Adam updates written out, the same numbers bit for bit."""

import pytest
import torch

from utils.optimizers import Adam, sgd_step


def problem(seed: int):
    """Two parameters (one a matrix) and a loss whose gradients change from step to step; a
    third parameter that never gets a gradient."""
    generator = torch.Generator().manual_seed(seed)
    weights = torch.randn(5, 3, generator=generator)
    bias = torch.randn(3, generator=generator)
    unused = torch.randn(2, generator=generator)
    data = torch.randn(16, 5, generator=generator)
    target = torch.randn(16, 3, generator=generator)

    def loss(w, b):
        return (torch.softmax(data @ w + b, dim=-1) * 4 - target).pow(2).sum()
    return (weights, bias, unused), loss


def twin_runs(seed: int, ours_factory, theirs_factory, steps: int):
    (w, b, unused), loss = problem(seed)
    ours = [t.clone().requires_grad_() for t in (w, b, unused)]
    theirs = [t.clone().requires_grad_() for t in (w, b, unused)]
    ours_step, theirs_opt = ours_factory(ours), theirs_factory(theirs)
    for _ in range(steps):
        loss(*ours[:2]).backward()
        loss(*theirs[:2]).backward()
        ours_step()
        theirs_opt.step()
        theirs_opt.zero_grad()
        for a, b in zip(ours, theirs):
            assert torch.equal(a, b), "the written-out update differs from torch.optim's"
        assert all(p.grad is None for p in ours)
    assert torch.equal(ours[2], unused)                      # no gradient: never moved
    return ours


@pytest.mark.parametrize("seed, lr", [(0, 0.5), (1, 0.1), (2, 0.037)])
def test_sgd_step_is_torch_sgd_bitwise(seed, lr):
    twin_runs(seed, lambda ps: (lambda: sgd_step(ps, lr)),
              lambda ps: torch.optim.SGD(ps, lr=lr), steps=8)


@pytest.mark.parametrize("seed, lr, betas, eps", [(0, 0.05, (0.9, 0.999), 1e-8),
                                                  (1, 1e-3, (0.8, 0.99), 1e-6),
                                                  (2, 0.05 / 32, (0.9, 0.999), 0.0)])
def test_adam_is_torch_adam_bitwise(seed, lr, betas, eps):
    def ours(ps):
        optimizer = Adam(ps, lr=lr, betas=betas, eps=eps)
        return lambda: (optimizer.step(), optimizer.zero_grad())
    trained = twin_runs(seed, ours, lambda ps: torch.optim.Adam(ps, lr=lr, betas=betas, eps=eps),
                        steps=25)
    assert not torch.equal(trained[0], problem(seed)[0][0])  # it did train


def test_adam_skips_a_parameter_without_gradient_and_keeps_its_count():
    # A parameter that misses a step keeps its own step count, as torch.optim.Adam's does.
    (w, b, _), loss = problem(3)
    ours, theirs = [w.clone().requires_grad_(), b.clone().requires_grad_()], \
        [w.clone().requires_grad_(), b.clone().requires_grad_()]
    mine, reference = Adam(ours, lr=0.05), torch.optim.Adam(theirs, lr=0.05)
    for step in range(6):
        for params, optimizer in ((ours, mine), (theirs, reference)):
            optimizer.zero_grad()
            (loss(*params) if step % 2 else loss(params[0], params[1].detach())).backward()
            optimizer.step()
        assert all(torch.equal(a, c) for a, c in zip(ours, theirs))
    assert mine.steps == [6, 3]


@pytest.mark.parametrize("call, message", [
    (lambda: sgd_step([torch.zeros(2)], lr=0), r"learning rate lr must be > 0, got 0"),
    (lambda: sgd_step([], lr=0.1), r"pass the tensors to train \(e\.g\. model\.parameters\(\)\), got \[\]$"),
    (lambda: Adam([3.0], lr=0.1), r"pass the tensors to train \(e\.g\. model\.parameters\(\)\), got \['float'\]"),
    (lambda: Adam([torch.zeros(2)], lr=-1), r"learning rate lr must be > 0, got -1"),
    (lambda: Adam([torch.zeros(2)], betas=(0.9, 1.0)), r"betas must be two numbers in \[0, 1\)"),
    (lambda: Adam([torch.zeros(2)], eps=-1e-8), r"eps must be >= 0, got -1e-08"),
])
def test_bad_settings_get_a_one_line_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
