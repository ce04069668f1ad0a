"""Lesson 2's exercises (02_attention_pooling): the typical mistakes its test cells name, and a
second correct answer to every exercise (see ``grading_fixtures.exercise_kit``)."""

from grading_fixtures.exercise_kit import A, M  # noqa: F401

MISTAKES = [
    M("c2-softmax-queries", "gaussian_nadaraya_watson", "test_gaussian_nadaraya_watson",
      [("torch.softmax(scores, dim=1)", "torch.softmax(scores, dim=0)")],
      "each column sums to 1 over the queries"),
    M("c2-no-two", "gaussian_nadaraya_watson", "test_gaussian_nadaraya_watson",
      [("/ (2 * sigma ** 2)", "/ sigma ** 2")], "you left out the 2"),
    M("c2-no-clamp", "epanechnikov_weights", "test_epanechnikov_weights",
      [("torch.clamp(1 - u ** 2, min=0.0)", "1 - u ** 2")], "negative kernel values"),
    M("c2-no-sigma", "epanechnikov_weights", "test_epanechnikov_weights",
      [("x_keys[None, :]) / sigma", "x_keys[None, :])")],
      "divide the distances by sigma before the kernel"),
    M("c2-self-included", "leave_one_out_errors", "test_leave_one_out_errors",
      [("scores.masked_fill(self_pair, -math.inf)", "scores")], "itself included",
      ["test_best_sigma"]),                      # best_sigma calls leave_one_out_errors
    M("c2-summed", "leave_one_out_errors", "test_leave_one_out_errors",
      [("((weights @ y - y) ** 2).mean()", "((weights @ y - y) ** 2).sum()")],
      "average the squared errors over the n points"),
    M("c2-argmax", "best_sigma", "test_best_sigma",
      [(".argmin()", ".argmax()")], "largest leave-one-out error"),
    M("c2-training-error", "best_sigma", "test_best_sigma",
      [("candidates[int(leave_one_out_errors(x_train, y_train, candidates).argmin())]",
        "min(candidates, key=lambda s: float(((gaussian_nadaraya_watson(\n"
        "    x_train, x_train, y_train, s)[0] - y_train) ** 2).mean()))")],
      "always wins on the training error"),
]

ALTERNATIVES = [
]
