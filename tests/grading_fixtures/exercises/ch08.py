"""Lesson 8's exercises (08_language_model): the typical mistakes its test cells name, and a
second correct answer to every exercise (see ``grading_fixtures.exercise_kit``)."""

from grading_fixtures.exercise_kit import A, M  # noqa: F401

_CACHE_KEYS = "keys = torch.cat((cache_k, k), dim=2)"
_CACHE_VALUES = "values = torch.cat((cache_v, v), dim=2)"
_SOFTMAX_AXIS = "probs = torch.softmax(ranked, dim=-1)"
_CUMSUM_AXIS = "before = torch.cumsum(probs, dim=-1) - probs"

MISTAKES = [
    # Exercise 1: the causal mask of a padded batch (2 points: the mask 1.5, the ValueError 0.5).
    M("c08-mask-not-itself", "causal_padding_mask", "test_causal_padding_mask",
      [("positions[None, :] <= positions[:, None]", "positions[None, :] < positions[:, None]")],
      "each token may attend to itself", earns=0.5),
    M("c08-mask-padding-kept", "causal_padding_mask", "test_causal_padding_mask",
      [("return not_future[None, :, :] & real_key[:, None, :]",
        "return not_future[None, :, :].expand(len(valid_lens), -1, -1)")],
      "the padding keys are not masked", earns=0.5),
    M("c08-mask-transposed", "causal_padding_mask", "test_causal_padding_mask",
      [("positions[None, :] <= positions[:, None]", "positions[None, :] >= positions[:, None]")],
      "the mask is transposed", earns=0.5),
    M("c08-mask-too-long-accepted", "causal_padding_mask", "test_causal_padding_mask",
      [("if (valid_lens < 1).any() or (valid_lens > num_steps).any():", "if (valid_lens < 1).any():")],
      "a length below 1 or above num_steps raises a ValueError", earns=1.5),
    # Exercise 2: a key/value cache for a sliding-window layer (3 points: caches 1, outputs 1.5,
    # ValueError 0.5).
    M("c08-cache-no-scale", "layer_step", "test_layer_step",
      [(" / math.sqrt(d_h)", "")], "the scores are not scaled", earns=1.5),
    M("c08-cache-sqrt-d", "layer_step", "test_layer_step",
      [("/ math.sqrt(d_h)", "/ math.sqrt(D_MODEL)")],
      "each head scales by √d_h (its own size, 4)", earns=1.5),
    M("c08-cache-new-first", "layer_step", "test_layer_step",
      [(_CACHE_KEYS, "keys = torch.cat((k, cache_k), dim=2)"),
       (_CACHE_VALUES, "values = torch.cat((v, cache_v), dim=2)")],
      "append the new key AFTER the cached ones", earns=0.5),
    M("c08-cache-replaced", "layer_step", "test_layer_step",
      [(_CACHE_KEYS, "keys = k"), (_CACHE_VALUES, "values = v")],
      "the cache must keep every position the window still needs", earns=0.5),
    M("c08-cache-appended-twice", "layer_step", "test_layer_step",
      [(_CACHE_KEYS, "keys = torch.cat((cache_k, k, k), dim=2)"),
       (_CACHE_VALUES, "values = torch.cat((cache_v, v, v), dim=2)")],
      "the new key was appended twice", earns=0.5),
    M("c08-cache-no-w-o", "layer_step", "test_layer_step",
      [(".reshape(b, 1, D_MODEL) @ W_o", ".reshape(b, 1, D_MODEL)")],
      "apply W_o to the heads put side by side", earns=1.5),
    M("c08-cache-softmax-query-axis", "layer_step", "test_layer_step",
      [("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=2)")],
      "every weight is 1: the softmax ran over an axis of length 1", earns=1.5),
    M("c08-cache-past-only", "layer_step", "test_layer_step",
      [("scores = q @ keys.transpose(-2, -1)", "scores = q @ cache_k.transpose(-2, -1)"),
       ("heads = attention @ values", "heads = attention @ cache_v")],
      "attend to the new token too", earns=1.5),
    M("c08-cache-window-ignored", "layer_step", "test_layer_step",
      [(_CACHE_KEYS + "[:, :, -WINDOW:]", _CACHE_KEYS), (_CACHE_VALUES + "[:, :, -WINDOW:]", _CACHE_VALUES)],
      "the cache keeps keys that left the window", earns=0.5),
    M("c08-cache-window-trimmed-late", "layer_step", "test_layer_step",
      [(_CACHE_KEYS + "[:, :, -WINDOW:]", _CACHE_KEYS), (_CACHE_VALUES + "[:, :, -WINDOW:]", _CACHE_VALUES),
       ("return out, keys, values", "return out, keys[:, :, -WINDOW:], values[:, :, -WINDOW:]")],
      "the query sees WINDOW + 1 positions", earns=1.5),
    # Exercise 3: the induction score (3 points: the score 2, per head 0.5, ValueError 0.5).
    M("c08-induction-on-occurrence", "induction_score", "test_induction_score",
      [("targets = latest[queries] + 1", "targets = latest[queries]")],
      "the target is the position AFTER the earlier occurrence", earns=1),
    M("c08-induction-first-occurrence", "induction_score", "test_induction_score",
      [("torch.where(same & earlier, position[None, :], -1).amax(dim=1)",
        "torch.where(same & earlier, position[None, :], n).amin(dim=1)"),
       ("queries = torch.nonzero(latest >= 0).flatten()", "queries = torch.nonzero(latest < n).flatten()")],
      "take the LATEST earlier occurrence", earns=1),
    M("c08-induction-all-queries", "induction_score", "test_induction_score",
      [("return weights[:, queries, targets].mean(dim=1)", "return weights[:, queries, targets].sum(dim=1) / n")],
      "average over the queries that have a target only", earns=1),
    M("c08-induction-transposed", "induction_score", "test_induction_score",
      [("weights[:, queries, targets]", "weights[:, targets, queries]")],
      "rows are queries and columns keys", earns=1),
    M("c08-induction-no-value-error", "induction_score", "test_induction_score",
      [("    if queries.numel() == 0:\n"
        "        raise ValueError(\"no token repeats in this sequence, so no query has an induction target\")\n",
        "")],
      "no repeated token: a ValueError whose message", earns=2.5),
    # Exercise 4: find and fix the top-p filter (3 points: batches 2, edge cases in one row and a batch 1).
    M("c08-topp-unfixed", "top_p_filter", "test_top_p_filter",
      [(_SOFTMAX_AXIS, "probs = torch.softmax(ranked, dim=0)"),
       (_CUMSUM_AXIS, "before = torch.cumsum(probs, dim=0) - probs")],
      "the softmax or the cumulative sum still runs over axis 0", earns=0),
    M("c08-topp-cumsum-unfixed", "top_p_filter", "test_top_p_filter",
      [(_CUMSUM_AXIS, "before = torch.cumsum(probs, dim=0) - probs")],
      "the softmax or the cumulative sum still runs over axis 0", earns=0),
    M("c08-topp-axis-one", "top_p_filter", "test_top_p_filter",
      [(_SOFTMAX_AXIS, "probs = torch.softmax(ranked, dim=1)"),
       (_CUMSUM_AXIS, "before = torch.cumsum(probs, dim=1) - probs")],
      "that axis does not exist for 1-D logits", earns=0),
    M("c08-topp-crossing-dropped", "top_p_filter", "test_top_p_filter",
      [(_CUMSUM_AXIS, "before = torch.cumsum(probs, dim=-1)")],
      "keep the token that crosses top_p", earns=0),
    M("c08-topp-one-rounds", "top_p_filter", "test_top_p_filter",
      [("    if top_p == 1:\n        return logits.clone()", "    if False:\n        pass")],
      "with top_p = 1 rounding makes the cumulative sum reach 1", earns=2),
    # Exercise 6: predictions (3 points, one per prediction; graded in the hidden tests).
    M("c08-predict-keys-only", "predictions", "test_predictions",
      [("predicted_cache_bytes = 2 * 6 * 4", "predicted_cache_bytes = 6 * 4")],
      "count keys AND values", earns=2),
    M("c08-predict-not-shared", "predictions", "test_predictions",
      [("predicted_cache_bytes = 2 * 6 * 4 * 32", "predicted_cache_bytes = 2 * 6 * 16 * 32")],
      "the query heads share the key/value heads", earns=2),
    M("c08-predict-float32", "predictions", "test_predictions",
      [("* 1000 * 4 * 2", "* 1000 * 4 * 4")], "float16 takes 2 bytes a number", earns=2),
    M("c08-predict-prompt-forgotten", "predictions", "test_predictions",
      [("sum(k * k for k in range(40, 70))", "sum(k * k for k in range(1, 31))")],
      "the prompt is read again at every step", earns=2),
    M("c08-predict-prompt-one-query", "predictions", "test_predictions",
      [("predicted_pairs_with_cache = 40 * 40 + sum(range(41, 70))",
        "predicted_pairs_with_cache = 40 + sum(range(41, 70))")],
      "the first step reads the whole prompt", earns=2),
    M("c08-predict-cached-without-prompt", "predictions", "test_predictions",
      [("predicted_pairs_with_cache = 40 * 40 + sum(range(41, 70))",
        "predicted_pairs_with_cache = sum(range(1, 31))")],
      "the cache holds the prompt's keys too", earns=2),
]
ALTERNATIVES = [
    A("causal_padding_mask", '''def causal_padding_mask(valid_lens, num_steps):
    """valid_lens (b,) -> bool (b, num_steps, num_steps): True where query i may see key j."""
    lengths = valid_lens.tolist()
    if min(lengths) < 1 or max(lengths) > num_steps:
        raise ValueError(f"every length must be between 1 and num_steps={num_steps}; got {lengths}")
    masks = []
    for length in lengths:
        mask = torch.zeros(num_steps, num_steps, dtype=torch.bool)
        for query in range(num_steps):
            mask[query, :min(query + 1, length)] = True      # the past, real tokens only
        masks.append(mask)
    return torch.stack(masks)
'''),
    A("layer_step", '''def layer_step(x, cache_k, cache_v):
    """x (b, 1, d); cache_k, cache_v (b, h, t, d_h) -> (out (b, 1, d), the new caches (b, h, t', d_h))."""
    if x.dim() != 3 or tuple(x.shape[1:]) != (1, D_MODEL):
        raise ValueError(f"one token per sequence, (b, 1, {D_MODEL}), please: x has shape {list(x.shape)}")
    size = D_MODEL // NUM_HEADS
    start = max(0, cache_k.shape[2] + 1 - WINDOW)                              # oldest position kept
    outputs, all_keys, all_values = [], [], []
    for head in range(NUM_HEADS):
        columns = slice(head * size, (head + 1) * size)
        query = x[:, 0] @ W_q[:, columns]                                       # (b, d_h)
        head_keys = torch.cat([cache_k[:, head, start:], x @ W_k[:, columns]], dim=1)   # (b, <= WINDOW, d_h)
        head_values = torch.cat([cache_v[:, head, start:], x @ W_v[:, columns]], dim=1)
        weights = torch.softmax(torch.einsum("bd,btd->bt", query, head_keys) / size ** 0.5, dim=1)
        outputs.append(torch.einsum("bt,btd->bd", weights, head_values))      # (b, d_h)
        all_keys.append(head_keys)
        all_values.append(head_values)
    joined = torch.cat(outputs, dim=1)                                          # (b, d)
    return (joined @ W_o)[:, None, :], torch.stack(all_keys, dim=1), torch.stack(all_values, dim=1)
'''),
    A("induction_score", '''def induction_score(weights, tokens):
    """weights (h, n, n) rows = queries, tokens (n,) -> (h,): each head's mean weight on the position
    right after the latest earlier occurrence of the query's token, over the queries that have one."""
    last_seen, rows, columns = {}, [], []
    for i, token in enumerate(tokens.tolist()):
        if token in last_seen:
            rows.append(i)
            columns.append(last_seen[token] + 1)
        last_seen[token] = i
    if not rows:
        raise ValueError("nothing to score: no token repeats")
    scores = [weights[head][rows, columns].sum() / len(rows) for head in range(weights.shape[0])]
    return torch.stack(scores)
'''),
    A("top_p_filter", '''def top_p_filter(logits, top_p):
    """Nucleus (top-p) filter: logits (..., V) -> (..., V), the removed tokens at -inf; each row on its own."""
    if top_p <= 0 or top_p > 1:
        raise ValueError(f"top_p = {top_p} is outside (0, 1]")
    rows = logits.reshape(-1, logits.shape[-1])
    filtered = torch.full_like(rows, -math.inf)
    for r in range(rows.shape[0]):
        p, index = torch.sort(torch.softmax(rows[r], dim=0), descending=True, stable=True)
        total = torch.cumsum(p, dim=0)
        count = len(p) if top_p == 1 else 1 + int((total[:-1] < top_p).sum())
        filtered[r, index[:count]] = rows[r, index[:count]]
    return filtered.reshape(logits.shape)
'''),
    A("predictions", '''# Your predictions, as whole numbers:
predicted_cache_bytes = 12_288_000
predicted_pairs_without_cache = round((69.5 ** 3 - 39.5 ** 3) / 3)     # the sum of k squared, k = 40 .. 69
predicted_pairs_with_cache = 1600 + (41 + 69) * 29 // 2
'''),
]
