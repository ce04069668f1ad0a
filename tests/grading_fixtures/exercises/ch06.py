"""Lesson 6's exercises (06_self_attention_positional_encoding): the typical mistakes its test cells name, and a
second correct answer to every exercise (see ``grading_fixtures.exercise_kit``)."""

from grading_fixtures.exercise_kit import A, M  # noqa: F401

MISTAKES = [
    M("c6-sin-cos-swapped", "sinusoidal_table", "test_sinusoidal_table",
      [("= torch.sin(angles), torch.cos(angles)", "= torch.cos(angles), torch.sin(angles)")],
      "sin and cos are swapped"),
    M("c6-two-halves", "sinusoidal_table", "test_sinusoidal_table",
      [("grid[:, 0::2], grid[:, 1::2] = torch.sin(angles), torch.cos(angles)",
        "grid = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)")],
      "must alternate column by column"),
    M("c6-exponent-j", "sinusoidal_table", "test_sinusoidal_table",
      [("-torch.arange(0, dim, 2, dtype=torch.float64) / dim",
        "-torch.arange(dim // 2, dtype=torch.float64) / dim")],
      "wrong frequencies"),
    M("c6-rotation-transposed", "shift_rotation", "test_shift_rotation",
      [("torch.stack([torch.cos(a), torch.sin(a)])", "torch.stack([torch.cos(a), -torch.sin(a)])"),
       ("torch.stack([-torch.sin(a), torch.cos(a)])", "torch.stack([torch.sin(a), torch.cos(a)])")],
      "your matrix shifts by -delta"),
    M("c6-one-angle", "shift_rotation", "test_shift_rotation",
      [("turn = delta * base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)",
        "turn = torch.full((dim // 2,), float(delta), dtype=torch.float64)")],
      "every block turns by the same angle"),
    M("c6-no-sqrt-d", "causal_self_attention", "test_causal_self_attention",
      [("(X @ X.transpose(1, 2)) / math.sqrt(d)", "(X @ X.transpose(1, 2))")],
      "the scores are not scaled"),
    M("c6-diagonal-masked", "causal_self_attention", "test_causal_self_attention",
      [(".triu(1)", ".triu(0)")], "token i may attend to itself"),
]

ALTERNATIVES = [
]
