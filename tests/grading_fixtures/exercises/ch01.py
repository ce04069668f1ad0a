"""Lesson 1's exercises (01_attention_cues): the typical mistakes its test cells name, and a
second correct answer to every exercise (see ``grading_fixtures.exercise_kit``).

The four autograded exercises are independent (no exercise calls another's answer), so no
mistake has downstream cells.
"""

from grading_fixtures.exercise_kit import A, M  # noqa: F401

MISTAKES = [
    # Exercise 1 (predict): the five predictions.
    M("c01-winner-python-index", "predictions", "test_predictions",
      [("winner_a = 1", "winner_a = 0")], "Python's index of the winner", earns=3),
    M("c01-tie-broken", "predictions", "test_predictions",
      [("entropy_b = math.log(2)", "entropy_b = 0.0")],
      "a tie is not broken by a small temperature", earns=3),
    M("c01-losing-tie-counts", "predictions", "test_predictions",
      [("entropy_c = 0.0", "entropy_c = math.log(2)")],
      "ties count only among the keys with the LARGEST score", earns=3.5),
    M("c01-entropy-in-bits", "predictions", "test_predictions",
      [("entropy_d = math.log(3)", "entropy_d = math.log2(3)")],
      "that is the entropy in bits", earns=3),
    M("c01-hot-keeps-the-tie", "predictions", "test_predictions",
      [("entropy_e = math.log(4)", "entropy_e = math.log(2)")],
      "as T grows the keys with low scores catch up too", earns=3.5),
    # Exercise 2 (practice): attend.
    M("c01-attend-softmax-queries", "attend", "test_attend",
      [("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=1)")],
      "each query's weights must sum to 1 over the keys", earns=0.25),
    M("c01-attend-keys-not-transposed", "attend", "test_attend",
      [("queries @ keys.transpose(-2, -1)", "queries @ keys")],
      "scores need Q Kᵀ: transpose the keys' last two axes", earns=0.25),
    M("c01-attend-no-sqrt-d", "attend", "test_attend",
      [("/ (math.sqrt(d) * temperature)", "/ temperature")],
      "the scores are not scaled by sqrt(d)", earns=0.5),
    M("c01-attend-times-temperature", "attend", "test_attend",
      [("/ (math.sqrt(d) * temperature)", "* temperature / math.sqrt(d)")],
      "a large temperature must flatten the weights", earns=1.5),
    M("c01-attend-swapped-pair", "attend", "test_attend",
      [("return weights @ values, weights", "return weights, weights @ values")],
      "return the pair (outputs, weights), in that order", earns=0.25),
    M("c01-attend-exp-overflow", "attend", "test_attend",
      [("weights = torch.softmax(scores, dim=-1)",
        "weights = torch.exp(scores) / torch.exp(scores).sum(dim=-1, keepdim=True)")],
      "weights for huge scores are not finite: exp overflowed", earns=1.75),
    M("c01-attend-temperature-unchecked", "attend", "test_attend",
      [("    if not temperature > 0:\n"
        "        raise ValueError(f\"temperature must be > 0, got {temperature}\")\n", "")],
      "attend(q, k, v, temperature=0): expected a ValueError", earns=1.75),
    # Exercise 3 (find and fix): temperature_sweep.
    M("c01-sweep-left-unfixed", "temperature_sweep", "test_temperature_sweep",
      [("dim=-1)", "dim=0)")], "this is still the colleague's output"),
    M("c01-sweep-rows-are-keys", "temperature_sweep", "test_temperature_sweep",
      [("dim=-1)    # (k, n): over the keys", "dim=-1).T")], "your rows are the keys"),
    M("c01-sweep-times-temperature", "temperature_sweep", "test_temperature_sweep",
      [("scores[None, :] / temps[:, None]", "scores[None, :] * temps[:, None]")],
      "a large temperature must flatten the weights", earns=1),
    M("c01-sweep-no-sqrt-d", "temperature_sweep", "test_temperature_sweep",
      [("keys @ query / math.sqrt(d)", "keys @ query")],
      "the scores are not divided by sqrt(d) any more", earns=1),
    # Exercise 4 (variant): query_for_weights.
    M("c01-query-no-sqrt-d", "query_for_weights", "test_query_for_weights",
      [("math.sqrt(d) * temperature * torch.log", "temperature * torch.log")],
      "too flat: the softmax divides", earns=1.5),
    M("c01-query-no-temperature", "query_for_weights", "test_query_for_weights",
      [("math.sqrt(d) * temperature * torch.log", "math.sqrt(d) * torch.log")],
      "your query ignores the temperature", earns=2.5),
    M("c01-query-demands-independent-keys", "query_for_weights", "test_query_for_weights",
      [("    # softmax ignores a common shift c",
        "    if torch.linalg.matrix_rank(keys) < n:\n"
        "        raise ValueError(\"the keys must be linearly independent\")\n"
        "    # softmax ignores a common shift c")],
      "some query does reach these weights", earns=2.5),
    M("c01-query-no-shift", "query_for_weights", "test_query_for_weights",
      [("system = torch.cat([keys.double(), torch.ones(n, 1, dtype=torch.float64)], dim=1)",
        "system = keys.double()"),
       ("    if miss > 1e-5 * (1 + target.abs().max().item()):", "    if False:")],
      "softmax ignores a shift of all scores, so solve", earns=2.5),
    M("c01-query-zero-weight-accepted", "query_for_weights", "test_query_for_weights",
      [("if not bool((weights > 0).all()):", "if bool((weights < 0).any()):")],
      "a weight of 0: expected a ValueError", earns=3.5),
]

ALTERNATIVES = [
    A("predictions", '''# Plain numbers, worked out by hand (entropies in nats).
winner_a = 4 - 3              # scores -10, -50, -30, -30: the least negative is the first key's
entropy_b, entropy_c = 0.6931, 0
entropy_d = 1.0986            # keys 1, 3 and 4 share the weight
entropy_e = 2 * 0.6931        # uniform over four keys
'''),
    A("attend", '''def attend(queries, keys, values, temperature=1.0):
    """queries (batch, m, d), keys (batch, n, d), values (batch, n, v)
    -> (outputs (batch, m, v), weights (batch, m, n))."""
    if temperature <= 0:
        raise ValueError("the temperature must be positive")
    scale = 1.0 / (temperature * queries.shape[-1] ** 0.5)
    logits = torch.einsum("bmd,bnd->bmn", queries, keys) * scale
    shifted = logits - logits.amax(dim=-1, keepdim=True)     # exp stays finite
    exps = shifted.exp()
    probs = exps / exps.sum(dim=-1, keepdim=True)
    return torch.einsum("bmn,bnv->bmv", probs, values), probs
'''),
    A("temperature_sweep", '''def temperature_sweep(query, keys, temperatures):
    """query (d,), keys (n, d), temperatures: a list of k numbers > 0
    -> weights (k, n): row t is the query's attention weights at temperatures[t]."""
    raw = (keys * query).sum(dim=1) * keys.shape[1] ** -0.5      # (n,)
    rows = []
    for t in temperatures:
        z = raw / float(t)
        e = torch.exp(z - z.max())
        rows.append(e / e.sum())
    return torch.stack(rows)                                     # (k, n)
'''),
    A("query_for_weights", '''def query_for_weights(keys, weights, temperature=1.0):
    """keys (n, d), weights (n,) -> query (d,): softmax(keys @ query / (sqrt(d) T)) = weights."""
    n, d = keys.shape
    if temperature <= 0:
        raise ValueError("the temperature must be positive")
    if weights.min() <= 0 or (weights.sum() - 1).abs() > 1e-4:
        raise ValueError("each weight must be positive and the weights must sum to 1")
    # Centre the log-weights and the keys: a common shift of the scores drops out.
    rhs = (torch.log(weights.double()) * temperature * d ** 0.5)
    rhs = rhs - rhs.mean()
    centred = keys.double() - keys.double().mean(dim=0)
    q = torch.linalg.lstsq(centred, rhs[:, None], driver="gelsd").solution.squeeze(1)
    scores = centred @ q
    if not torch.allclose(scores - scores.mean(), rhs, atol=1e-4 * (1 + float(rhs.abs().max()))):
        raise ValueError("there is no query for these weights with these keys")
    return q.float()
'''),
]
