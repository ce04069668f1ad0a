"""Lesson 7's exercises (07_transformer): the typical mistakes its test cells name, and a
second correct answer to every exercise (see ``grading_fixtures.exercise_kit``)."""

from grading_fixtures.exercise_kit import A, M  # noqa: F401

MISTAKES = [
    M("c7-unbiased-variance", "add_norm", "test_add_norm",
      [("var = ((S - mean) ** 2).mean(dim=-1, keepdim=True)", "var = S.var(dim=-1, keepdim=True)")],
      "use the biased variance"),
    M("c7-over-steps", "add_norm", "test_add_norm",
      [("mean = S.mean(dim=-1, keepdim=True)", "mean = S.mean(dim=1, keepdim=True)"),
       ("((S - mean) ** 2).mean(dim=-1, keepdim=True)", "((S - mean) ** 2).mean(dim=1, keepdim=True)")],
      "not over the steps"),
    M("c7-no-residual", "add_norm", "test_add_norm",
      [("S = X + Y", "S = Y")], "normalise the sum X + Y"),
    M("c7-new-tokens-first", "cached_causal_mask", "test_cached_causal_mask",
      [("torch.arange(num_keys - num_queries, num_keys)", "torch.arange(num_queries)")],
      "the new tokens are the last num_queries positions"),
    M("c7-not-itself", "cached_causal_mask", "test_cached_causal_mask",
      [("<= positions[:, None]", "< positions[:, None]")], "each query may attend to itself"),
    M("c7-no-ffn-biases", "encoder_block_parameter_count", "test_encoder_block_parameter_count",
      [("ffn = d * f + f + f * d + d", "ffn = d * f + f * d")],
      "the FFN's two linear layers always have biases"),
    M("c7-no-norms", "encoder_block_parameter_count", "test_encoder_block_parameter_count",
      [("norms = 2 * 2 * d", "norms = 0")], "each of the two layer norms"),
]

ALTERNATIVES = [
]
