"""Lesson 5's exercises (05_multihead_attention): the typical mistakes its test cells name, and a
second correct answer to every exercise (see ``grading_fixtures.exercise_kit``)."""

from grading_fixtures.exercise_kit import A, M  # noqa: F401

_GQA_SPLITS = [
    ("queries.reshape(b, m, num_heads, d).permute(0, 2, 1, 3)", "queries.reshape(b, num_heads, m, d)"),
    ("keys.reshape(b, n, num_kv_heads, d).permute(0, 2, 1, 3)", "keys.reshape(b, num_kv_heads, n, d)"),
    ("values.reshape(b, n, num_kv_heads, d).permute(0, 2, 1, 3)",
     "values.reshape(b, num_kv_heads, n, d)"),
]
_FIX_Q = ("queries.reshape(b, m, num_heads, d).transpose(1, 2)", "queries.reshape(b, num_heads, m, d)")
_FIX_KV = [("keys.reshape(b, n, num_heads, d).transpose(1, 2)", "keys.reshape(b, num_heads, n, d)"),
           ("values.reshape(b, n, num_heads, d).transpose(1, 2)", "values.reshape(b, num_heads, n, d)")]

MISTAKES = [
    # Exercise 1: grouped-query attention (5 points: shape and averages, g = h, g = 1, grouping,
    # ValueError).
    M("c05-gqa-tiled", "grouped_query_attention", "test_grouped_query_attention",
      [("k = k.repeat_interleave(group, dim=1)", "k = k.repeat(1, group, 1, 1)"),
       ("v = v.repeat_interleave(group, dim=1)", "v = v.repeat(1, group, 1, 1)")],
      "query heads paired with the K/V heads in turn (0, 1, 0, 1)", earns=4),
    M("c05-gqa-full-width-scale", "grouped_query_attention", "test_grouped_query_attention",
      [("/ d ** 0.5, dim=-1)", "/ width ** 0.5, dim=-1)")],
      "scaled by the full width: divide the scores by √d", earns=3),
    M("c05-gqa-heads-not-moved", "grouped_query_attention", "test_grouped_query_attention",
      _GQA_SPLITS, "heads split without moving the axis", earns=2),
    M("c05-gqa-softmax-queries", "grouped_query_attention", "test_grouped_query_attention",
      [("/ d ** 0.5, dim=-1)", "/ d ** 0.5, dim=-2)")],
      "softmax over the queries: each query's weights must sum to 1 over the keys", earns=1),
    M("c05-gqa-no-value-error", "grouped_query_attention", "test_grouped_query_attention",
      [("    if width % num_heads:\n"
        "        raise ValueError(f\"num_heads={num_heads} does not divide the query width {width}\")\n"
        "    if num_heads % num_kv_heads:\n"
        "        raise ValueError(f\"num_kv_heads={num_kv_heads} does not divide num_heads={num_heads}\")\n",
        "")],
      "expected a ValueError naming", earns=4),
    # Exercise 2: predictions (4 points, one per prediction).
    M("c05-predict-gqa-no-saving", "predictions", "test_predictions",
      [("2 * (256 * 256 + 256) + 2 * (256 * 64 + 64)", "4 * (256 * 256 + 256)")],
      "no saving counted", earns=3),
    M("c05-predict-gqa-no-bias", "predictions", "test_predictions",
      [("2 * (256 * 256 + 256) + 2 * (256 * 64 + 64)", "2 * 256 * 256 + 2 * 256 * 64")],
      "the biases are left out", earns=3),
    M("c05-predict-ratio-upside-down", "predictions", "test_predictions",
      [("predicted_cache_ratio = 8 / 2", "predicted_cache_ratio = 2 / 8")],
      "upside down", earns=3),
    M("c05-predict-weights-per-kv-head", "predictions", "test_predictions",
      [("(2, 8, 5, 7)", "(2, 2, 5, 7)")],
      "one weight map per K/V head counted", earns=3),
    M("c05-predict-macs-shared", "predictions", "test_predictions",
      [("predicted_attention_macs = 8 * 2 * 5 * 7 * 32", "predicted_attention_macs = 2 * 2 * 5 * 7 * 32")],
      "a saving counted in the attention products", earns=3),
    # Exercise 3: find and fix (3 points: locality 1, per-head attention 2).
    M("c05-fix-unchanged", "heads_attention", "test_heads_attention", [_FIX_Q, *_FIX_KV],
      "heads split without moving the axis: reshape(b, h, n, d)", earns=0),
    M("c05-fix-queries-only", "heads_attention", "test_heads_attention", _FIX_KV,
      "keys and values are still split without moving the axis", earns=1),
    M("c05-fix-merge-not-moved", "heads_attention", "test_heads_attention",
      [("(weights @ v).transpose(1, 2).reshape(b, m, width)", "(weights @ v).reshape(b, m, width)")],
      "merged without moving the axis back", earns=0),
    M("c05-fix-no-scale", "heads_attention", "test_heads_attention",
      [("/ d ** 0.5, dim=-1)", ", dim=-1)")], "the scores are not divided by √d", earns=1),
    # Exercise 4: mean attention distance (2 points: shape and distances 1.5, row order 0.5).
    M("c05-signed-distance", "mean_attention_distance", "test_mean_attention_distance",
      [(").abs()", ")")], "a distance is |q - k|, never negative", earns=0.5),
    M("c05-summed-queries", "mean_attention_distance", "test_mean_attention_distance",
      [("per_query.mean(dim=-1)", "per_query.sum(dim=-1)")], "4 times too large", earns=0.5),
    M("c05-averaged-keys", "mean_attention_distance", "test_mean_attention_distance",
      [("(weights * distance).sum(dim=-1)", "(weights * distance).mean(dim=-1)")],
      "4 times too small", earns=0.5),
    M("c05-rows-heads-first", "mean_attention_distance", "test_mean_attention_distance",
      [(".reshape(rows // num_heads, num_heads)", ".reshape(num_heads, rows // num_heads).T")],
      "rows read heads first", earns=1.5),
]

ALTERNATIVES = [
    A("grouped_query_attention", '''import math


def grouped_query_attention(queries, keys, values, num_heads, num_kv_heads):
    """One query head at a time, with einsum; each picks its K/V head's slice of features."""
    width = queries.shape[-1]
    if width % num_heads != 0:
        raise ValueError(f"the query width {width} cannot be cut into num_heads={num_heads} heads")
    if num_heads % num_kv_heads != 0:
        raise ValueError(f"num_kv_heads={num_kv_heads} must divide the {num_heads} query heads")
    size = width // num_heads
    per_group = num_heads // num_kv_heads
    heads = []
    for j in range(num_heads):
        kv = j // per_group
        qj = queries[..., j * size:(j + 1) * size]
        kj = keys[..., kv * size:(kv + 1) * size]
        vj = values[..., kv * size:(kv + 1) * size]
        scores = torch.einsum("bmd,bnd->bmn", qj, kj) / math.sqrt(size)
        heads.append(torch.einsum("bmn,bnd->bmd", scores.softmax(dim=-1), vj))
    return torch.cat(heads, dim=-1)
'''),
    A("predictions", '''# Worked out by hand before running anything.
predicted_gqa_parameters = 164_480          # W_q, W_o: 256 x 256 + 256 each; W_k, W_v: 256 x 64 + 64 each
predicted_cache_ratio = 4.0                 # 8 K/V heads against 2
predicted_weights_shape = [2, 8, 5, 7]
predicted_attention_macs = 17_920           # 2 · m · n · D = 2 · 5 · 7 · 256, as without sharing
'''),
    A("heads_attention", '''def heads_attention(queries, keys, values, num_heads):
    """The heads as a (b, len, h, d) view, attended with einsum: no transpose needed."""
    batch, steps, width = queries.shape
    size = width // num_heads
    per_q = queries.reshape(batch, steps, num_heads, size)
    per_k = keys.reshape(batch, keys.shape[1], num_heads, size)
    per_v = values.reshape(batch, values.shape[1], num_heads, size)
    scores = torch.einsum("bmhd,bnhd->bhmn", per_q, per_k) / size ** 0.5
    mixed = torch.einsum("bhmn,bnhd->bmhd", torch.softmax(scores, dim=-1), per_v)
    return mixed.reshape(batch, steps, width)
'''),
    A("mean_attention_distance", '''def mean_attention_distance(weights, num_heads):
    """Row by row: the weighted |q - k| of one head of one sequence, over its queries."""
    rows, steps, _ = weights.shape
    offsets = torch.arange(steps)
    gap = (offsets.unsqueeze(1) - offsets.unsqueeze(0)).abs().to(weights.dtype)
    result = torch.empty(rows // num_heads, num_heads, dtype=weights.dtype)
    for r in range(rows):
        result[r // num_heads, r % num_heads] = (weights[r] * gap).sum() / steps
    return result
'''),
]
