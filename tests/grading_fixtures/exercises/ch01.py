"""Lesson 1's exercises (01_attention_cues): the typical mistakes its test cells name, and a
second correct answer to every exercise (see ``grading_fixtures.exercise_kit``)."""

from grading_fixtures.exercise_kit import A, M  # noqa: F401

_USES_SCORES = ("test_attention_weights", "test_attend")       # lesson 1: both call scaled_scores
_BLAMES_1 = "but scaled_scores (exercise 1) is wrong: fix it first"
_BLAMES_2 = "but attention_weights (exercise 2) is wrong: fix it first"

MISTAKES = [
    M("c1-no-sqrt-d", "scaled_scores", "test_scaled_scores",
      [("/ math.sqrt(d)", "")], "the scores are not scaled", _USES_SCORES,
      [_BLAMES_1, _BLAMES_2]),
    M("c1-divide-by-d", "scaled_scores", "test_scaled_scores",
      [("/ math.sqrt(d)", "/ d")], "you divided by d", _USES_SCORES,
      [_BLAMES_1, _BLAMES_2]),
    M("c1-softmax-queries", "attention_weights", "test_attention_weights",
      [("scores = scores - scores.max(dim=-1, keepdim=True).values      # keeps exp finite\n"
        "    exp_scores = torch.exp(scores)\n"
        "    return exp_scores / exp_scores.sum(dim=-1, keepdim=True)",
        "return torch.softmax(scores, dim=1)")],
      "each row sums to 1 over the queries, not the keys", ["test_attend"], [_BLAMES_2]),
    M("c1-times-temperature", "attention_weights", "test_attention_weights",
      [("scaled_scores(queries, keys) / temperature", "scaled_scores(queries, keys) * temperature")],
      "divide the scores by the temperature, do not multiply", ["test_attend"],
      [_BLAMES_2]),
    M("c1-swapped-pair", "attend", "test_attend",
      [("return weights @ values, weights", "return weights, weights @ values")],
      "return the pair (outputs, weights), in that order"),
    M("c1-temperature-dropped", "attend", "test_attend",
      [("attention_weights(queries, keys, temperature)", "attention_weights(queries, keys)")],
      "attend ignores its temperature"),
    M("c1-query-no-sqrt-d", "query_for_weights", "test_query_for_weights",
      [("math.sqrt(d) * temperature * target_scores", "temperature * target_scores")],
      "too flat: the softmax divides"),
    M("c1-query-no-temperature", "query_for_weights", "test_query_for_weights",
      [("math.sqrt(d) * temperature * target_scores", "math.sqrt(d) * target_scores")],
      "your query ignores the temperature"),
]

ALTERNATIVES = [
]
