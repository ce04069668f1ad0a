"""Lesson 2's exercises (02_attention_pooling): the typical mistakes its test cells name, and a
second correct answer to every exercise (see ``grading_fixtures.exercise_kit``)."""

from grading_fixtures.exercise_kit import A, M  # noqa: F401

NO_SIGMA_CHECK = ('    if not sigma > 0:\n'
                  '        raise ValueError(f"sigma must be > 0, got {sigma}")\n')

MISTAKES = [
    # Exercise 1 (predict): a tie and the leave-one-out error at the two limits of the width.
    M("c02-tie-one-key", "predictions", "test_predictions",
      [("predicted_tie = (0 + 2) / 2", "predicted_tie = 0.0")],
      "x = 2 is equally far from the keys 1 and 3", earns=3),
    M("c02-tie-mean", "predictions", "test_predictions",
      [("predicted_tie = (0 + 2) / 2", "predicted_tie = 3.0")],
      "that is the mean of y_small", earns=3),
    M("c02-loo-training-error", "predictions", "test_predictions",
      [("loo_narrow = (16 + 16 + 4 + 16) / 4", "loo_narrow = 0.0"),
       ("loo_wide = ((8 / 3 - 4) ** 2 + (4 - 0) ** 2 + (10 / 3 - 2) ** 2 + (2 - 6) ** 2) / 4",
        "loo_wide = ((4 - 3) ** 2 + (0 - 3) ** 2 + (2 - 3) ** 2 + (6 - 3) ** 2) / 4")],
      "that is the training error", earns=1),
    M("c02-loo-prediction-summed", "predictions", "test_predictions",
      [("loo_wide = ((8 / 3 - 4) ** 2 + (4 - 0) ** 2 + (10 / 3 - 2) ** 2 + (2 - 6) ** 2) / 4",
        "loo_wide = (8 / 3 - 4) ** 2 + (4 - 0) ** 2 + (10 / 3 - 2) ** 2 + (2 - 6) ** 2")],
      "that is the sum of the four squared errors", earns=2.5),
    M("c02-loo-limits-swapped", "predictions", "test_predictions",
      [("loo_narrow = (16 + 16 + 4 + 16) / 4", "loo_narrow = 80 / 9"),
       ("loo_wide = ((8 / 3 - 4) ** 2 + (4 - 0) ** 2 + (10 / 3 - 2) ** 2 + (2 - 6) ** 2) / 4",
        "loo_wide = 13.0")],
      "that is the limit of a", earns=1),
    # Exercise 2 (find and fix): the classmate's exp underflows to 0/0 at a narrow width.
    M("c02-fix-not-found", "gaussian_nadaraya_watson", "test_gaussian_nadaraya_watson",
      [("    weights = torch.softmax(scores, dim=1)",
        "    weights = torch.exp(scores) / torch.exp(scores).sum(dim=1, keepdim=True)")],
      "every kernel value exp(score) of a query underflowed to 0"),
    M("c02-fix-wrong-axis", "gaussian_nadaraya_watson", "test_gaussian_nadaraya_watson",
      [("torch.softmax(scores, dim=1)", "torch.softmax(scores, dim=0)")],
      "each column sums to 1 over the queries"),
    M("c02-fix-no-two", "gaussian_nadaraya_watson", "test_gaussian_nadaraya_watson",
      [("/ (2 * sigma ** 2)", "/ sigma ** 2")], "you left out the 2", earns=1),
    M("c02-fix-sigma-multiplies", "gaussian_nadaraya_watson", "test_gaussian_nadaraya_watson",
      [("/ (2 * sigma ** 2)", "* sigma ** 2 / 2")],
      "sigma multiplies the distances instead of dividing them", earns=0.5),
    M("c02-fix-no-sigma-check", "gaussian_nadaraya_watson", "test_gaussian_nadaraya_watson",
      [(NO_SIGMA_CHECK, "")], "every sigma > 0 works, however small",
      earns=1.5),
    # Exercise 4 (variant): the tricube kernel.
    M("c02-tri-signed-u", "tricube_nadaraya_watson", "test_tricube_nadaraya_watson",
      [("u = distances / sigma", "u = (x_query[:, None] - x_keys[None, :]) / sigma")],
      "cube the absolute value |u|", earns=2),
    M("c02-tri-no-cutoff", "tricube_nadaraya_watson", "test_tricube_nadaraya_watson",
      [("torch.clamp(1 - u ** 3, min=0.0) ** 3", "(1 - u ** 3) ** 3")],
      "keys farther than sigma got non-zero kernel values", earns=4),
    M("c02-tri-sigma-multiplies", "tricube_nadaraya_watson", "test_tricube_nadaraya_watson",
      [("u = distances / sigma", "u = distances * sigma")],
      "sigma multiplies the distances instead of dividing them", earns=2),
    M("c02-tri-no-outer-cube", "tricube_nadaraya_watson", "test_tricube_nadaraya_watson",
      [("torch.clamp(1 - u ** 3, min=0.0) ** 3", "torch.clamp(1 - u ** 3, min=0.0)")],
      "the outer cube is missing", earns=4),
    M("c02-tri-nan", "tricube_nadaraya_watson", "test_tricube_nadaraya_watson",
      [("weights = torch.where(covered, kernel / torch.where(covered, totals, 1.0), nearest)",
        "weights = kernel / totals")],
      "a query with no key within sigma divided 0 by 0 (NaN)", earns=4),
    M("c02-tri-no-sigma-check", "tricube_nadaraya_watson", "test_tricube_nadaraya_watson",
      [(NO_SIGMA_CHECK, "")], "sigma <= 0 raises a ValueError whose message names sigma",
      earns=4),
    # Exercise 5 (variant): the Cauchy kernel's leave-one-out error.
    M("c02-loo-self-included", "cauchy_leave_one_out", "test_cauchy_leave_one_out",
      [("kernel = others / (1 + u ** 2)", "kernel = 1 / (1 + u ** 2)")],
      "each point was predicted from all n pairs, itself included", earns=1),
    M("c02-loo-summed", "cauchy_leave_one_out", "test_cauchy_leave_one_out",
      [(".mean(dim=1)", ".sum(dim=1)")],
      "average the squared errors over the n points", earns=1),
    M("c02-loo-gaussian", "cauchy_leave_one_out", "test_cauchy_leave_one_out",
      [("kernel = others / (1 + u ** 2)", "kernel = others * torch.exp(-u ** 2 / 2)")],
      "that is the Gaussian kernel's leave-one-out error", earns=2),
    M("c02-loo-sigma-multiplies", "cauchy_leave_one_out", "test_cauchy_leave_one_out",
      [("/ widths[:, None, None]", "* widths[:, None, None]")],
      "sigma multiplies the distances instead of dividing them", earns=2),
    M("c02-loo-message", "cauchy_leave_one_out", "test_cauchy_leave_one_out",
      [('f"every sigma must be > 0, got', 'f"every width must be > 0, got')],
      "a width <= 0 raises a ValueError whose message names sigma", earns=2),
]

ALTERNATIVES = [
    A("predictions", '''\
# Your three predictions, written before you run anything.
predicted_tie = 1                       # keys 1 and 3 tie: an even split of 0 and 2
loo_narrow = 13                         # each target from its nearest other key
loo_wide = 80 / 9                       # each target from the mean of the other three
'''),
    A("gaussian_nadaraya_watson", '''\
def gaussian_nadaraya_watson(x_query, x_keys, y_values, sigma=1.0):
    """x_query (m,), x_keys (n,), y_values (n,) -> predictions (m,), weights (m, n)."""
    if sigma <= 0:
        raise ValueError("sigma has to be positive, got %r" % (sigma,))
    diff = x_query.unsqueeze(1) - x_keys.unsqueeze(0)                 # (m, n)
    logits = -0.5 * (diff / sigma) ** 2
    logits = logits - logits.max(dim=1, keepdim=True).values          # no underflow to 0/0
    unnorm = torch.exp(logits)
    alpha = unnorm / unnorm.sum(dim=1, keepdim=True)                  # rows sum to 1
    return torch.einsum("mn,n->m", alpha, y_values), alpha
'''),
    A("tricube_nadaraya_watson", '''\
def tricube_nadaraya_watson(x_query, x_keys, y_values, sigma):
    """x_query (m,), x_keys (n,), y_values (n,), sigma > 0 -> predictions (m,), weights (m, n)."""
    if sigma <= 0:
        raise ValueError(f"tricube width sigma={sigma} is not positive")
    rows = []
    for x in x_query:                                  # one query at a time
        gap = (x - x_keys).abs()                       # (n,)
        k = torch.where(gap < sigma, (1 - (gap / sigma) ** 3) ** 3, torch.zeros_like(gap))
        if k.sum() > 0:
            rows.append(k / k.sum())
        else:                                          # nothing in reach: the nearest key
            rows.append(torch.nn.functional.one_hot(gap.argmin(), len(x_keys)).float())
    alpha = torch.stack(rows)                          # (m, n)
    return alpha @ y_values, alpha
'''),
    A("cauchy_leave_one_out", '''\
def cauchy_leave_one_out(x, y, sigmas):
    """x (n,), y (n,), sigmas: s widths (list or 1-D tensor) -> mean squared LOO errors (s,)."""
    widths = [float(s) for s in (sigmas.tolist() if torch.is_tensor(sigmas) else sigmas)]
    if min(widths) <= 0:
        raise ValueError(f"sigma values must be positive: {widths}")
    n = x.shape[0]
    keep = ~torch.eye(n, dtype=torch.bool)
    other_x = x.expand(n, n)[keep].view(n, n - 1)      # row i: every x but x_i
    other_y = y.expand(n, n)[keep].view(n, n - 1)
    out = []
    for s in widths:
        k = 1.0 / (1.0 + ((x.unsqueeze(1) - other_x) / s) ** 2)
        pred = (k * other_y).sum(1) / k.sum(1)
        out.append(torch.mean((pred - y) ** 2))
    return torch.stack(out)
'''),
]
