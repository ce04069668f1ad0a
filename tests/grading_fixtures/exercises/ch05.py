"""Lesson 5's exercises (05_multihead_attention): the typical mistakes its test cells name, and a
second correct answer to every exercise (see ``grading_fixtures.exercise_kit``)."""

from grading_fixtures.exercise_kit import A, M  # noqa: F401

MISTAKES = [
    M("c5-plain-reshape", "to_from_heads", "test_to_from_heads",
      [("    X = X.reshape(batch, steps, num_heads, features // num_heads)     # (b, n, h, d)\n"
        "    X = X.permute(0, 2, 1, 3)                                         # (b, h, n, d)\n",
        "")],
      "a plain reshape mixes the steps of different heads"),
    M("c5-heads-first", "to_from_heads", "test_to_from_heads",
      [("X = X.permute(0, 2, 1, 3)                                         # (b, h, n, d)",
        "X = X.permute(2, 0, 1, 3)")],
      "yours holds row j·batch + i"),
    M("c5-no-biases", "parameter_count", "test_parameter_count",
      [("(4 * num_hiddens if bias else 0)", "0")], "also has num_hiddens biases"),
    M("c5-all-square", "parameter_count", "test_parameter_count",
      [("(query_size + key_size + value_size + num_hiddens) * num_hiddens",
        "4 * num_hiddens * num_hiddens")],
      "take inputs of size query_size, key_size and value_size"),
    M("c5-signed-distance", "mean_attention_distance", "test_mean_attention_distance",
      [(").abs()", ")")], "a distance is |q - k|, never negative"),
    M("c5-summed-queries", "mean_attention_distance", "test_mean_attention_distance",
      [("per_query.mean(dim=-1)", "per_query.sum(dim=-1)")], "4 times too large"),
    M("c5-averaged-keys", "mean_attention_distance", "test_mean_attention_distance",
      [("(weights * distance).sum(dim=-1)", "(weights * distance).mean(dim=-1)")],
      "4 times too small"),
    M("c5-rows-heads-first", "mean_attention_distance", "test_mean_attention_distance",
      [(".reshape(rows // num_heads, num_heads)", ".reshape(num_heads, rows // num_heads).T")],
      "you read row j·batch + i (heads first)"),
]

ALTERNATIVES = [
]
