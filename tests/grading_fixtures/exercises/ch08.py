"""Lesson 8's exercises (08_language_model): the typical mistakes its test cells name, and a
second correct answer to every exercise (see ``grading_fixtures.exercise_kit``)."""

from grading_fixtures.exercise_kit import A, M  # noqa: F401

MISTAKES = [
    M("c8-not-itself", "causal_padding_mask", "test_causal_padding_mask",
      [("positions[None, :] <= positions[:, None]", "positions[None, :] < positions[:, None]")],
      "each token may attend to itself"),
    M("c8-padding-kept", "causal_padding_mask", "test_causal_padding_mask",
      [("return not_future[None, :, :] & real_key[:, None, :]",
        "return not_future[None, :, :].expand(len(valid_lens), -1, -1)")],
      "the padding keys are not masked"),
    M("c8-transposed", "causal_padding_mask", "test_causal_padding_mask",
      [("positions[None, :] <= positions[:, None]", "positions[None, :] >= positions[:, None]")],
      "the mask is transposed"),
    M("c8-crossing-dropped", "filter_top_k_top_p", "test_filter_top_k_top_p",
      [("before = probs.cumsum(dim=-1) - probs", "before = probs.cumsum(dim=-1)")],
      "keep the token that crosses top_p"),
    M("c8-logit-cumsum", "filter_top_k_top_p", "test_filter_top_k_top_p",
      [("probs = torch.softmax(ranked.masked_fill(~keep, -math.inf), dim=-1)",
        "probs = ranked.masked_fill(~keep, 0.0)")],
      "top-p adds up probabilities, not logits"),
    M("c8-whole-vocabulary", "filter_top_k_top_p", "test_filter_top_k_top_p",
      [("probs = torch.softmax(ranked.masked_fill(~keep, -math.inf), dim=-1)",
        "probs = torch.softmax(ranked, dim=-1)")],
      "top-p works on what top-k kept"),
    M("c8-ascending", "filter_top_k_top_p", "test_filter_top_k_top_p",
      [("descending=True", "descending=False")], "rank the tokens highest first"),
    M("c8-past-only", "attend_with_cache", "test_attend_with_cache",
      [("scores = q @ keys.transpose(1, 2)", "scores = q @ cache_k.transpose(1, 2)"),
       ("return weights @ values, keys, values", "return weights @ cache_v, keys, values")],
      "attend to the new token too"),
    M("c8-no-scale", "attend_with_cache", "test_attend_with_cache",
      [(" / math.sqrt(q.shape[-1])", "")], "the scores are not scaled"),
    M("c8-wrong-axis", "attend_with_cache", "test_attend_with_cache",
      [("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=1)")],
      "take the softmax over the last axis"),
    M("c8-new-first", "attend_with_cache", "test_attend_with_cache",
      [("torch.cat((cache_k, k), dim=1)", "torch.cat((k, cache_k), dim=1)"),
       ("torch.cat((cache_v, v), dim=1)", "torch.cat((v, cache_v), dim=1)")],
      "append the new key AFTER the cached ones"),
    M("c8-cache-replaced", "attend_with_cache", "test_attend_with_cache",
      [("keys = torch.cat((cache_k, k), dim=1)", "keys = k"),
       ("values = torch.cat((cache_v, v), dim=1)", "values = v")],
      "the cache grows by one position each step"),
]

ALTERNATIVES = [
]
