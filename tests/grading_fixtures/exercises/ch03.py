"""Lesson 3's exercises (03_scoring_functions): the typical mistakes its test cells name, and a
second correct answer to every exercise (see ``grading_fixtures.exercise_kit``)."""

from grading_fixtures.exercise_kit import A, M  # noqa: F401

MISTAKES = [
    M("c3-mask-after-softmax", "masked_softmax_2d", "test_masked_softmax_2d",
      [("torch.softmax(scores.masked_fill(~keep, -1e6), dim=-1)", "torch.softmax(scores, dim=-1)")],
      "the mask is applied after the softmax"),
    M("c3-one-key-too-many", "masked_softmax_2d", "test_masked_softmax_2d",
      [("< valid_lens[..., None]", "<= valid_lens[..., None]")], "one key too many"),
    M("c3-w-transposed", "bilinear_scores", "test_bilinear_scores",
      [("queries @ W @ keys", "queries @ W.T @ keys")], "you used W transposed"),
    M("c3-keys-first", "bilinear_scores", "test_bilinear_scores",
      [("queries @ W @ keys.transpose(1, 2)", "keys @ W.T @ queries.transpose(1, 2)")],
      "your scores are (batch, keys, queries): put the queries first"),
    M("c3-no-tanh", "additive_scores", "test_additive_scores",
      [("torch.tanh(projected_q", "(projected_q")], "go through tanh before w_v"),
    M("c3-broadcast-swapped", "additive_scores", "test_additive_scores",
      [("projected_q[:, :, None, :] + projected_k[:, None, :, :]",
        "projected_q[:, None, :, :] + projected_k[:, :, None, :]")],
      "add the queries as (batch, m, 1, h)"),
    M("c3-causal-off-by-one", "decoder_lengths", "test_decoder_lengths",
      [("torch.arange(1, tokens.shape[1] + 1, device=tokens.device)",
        "torch.arange(tokens.shape[1], device=tokens.device)")],
      "causal lengths are off by one"),
    M("c3-padding-not-hidden", "decoder_lengths", "test_decoder_lengths",
      [("return torch.minimum(causal[None, :], real[:, None])",
        "return causal[None, :].repeat(tokens.shape[0], 1)")],
      "padding is not hidden"),
]

ALTERNATIVES = [
]
