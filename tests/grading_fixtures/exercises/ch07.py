"""Lesson 7's exercises (07_transformer): the typical mistakes its test cells name, and a
second correct answer to every exercise (see ``grading_fixtures.exercise_kit``)."""

from grading_fixtures.exercise_kit import A, M  # noqa: F401

MISTAKES = [
    # Exercise 1: RMSNorm (3 checks: the root mean square, gamma, eps).
    M("c07-rms-mean-subtracted", "rms_norm", "test_rms_norm",
      [("mean_square = (X ** 2).mean(dim=-1, keepdim=True)",
        "mean_square = ((X - X.mean(dim=-1, keepdim=True)) ** 2).mean(dim=-1, keepdim=True)"),
       ("return gamma * X / torch.sqrt(mean_square + eps)",
        "return gamma * (X - X.mean(dim=-1, keepdim=True)) / torch.sqrt(mean_square + eps)")],
      "RMSNorm does not subtract the mean", earns=1),
    M("c07-rms-over-steps", "rms_norm", "test_rms_norm",
      [("(X ** 2).mean(dim=-1, keepdim=True)", "(X ** 2).mean(dim=1, keepdim=True)")],
      "not over the steps", earns=1),
    M("c07-rms-no-sqrt", "rms_norm", "test_rms_norm",
      [("torch.sqrt(mean_square + eps)", "(mean_square + eps)")],
      "take the square root of the mean square", earns=1),
    M("c07-rms-eps-outside", "rms_norm", "test_rms_norm",
      [("torch.sqrt(mean_square + eps)", "(torch.sqrt(mean_square) + eps)")],
      "add eps inside the square root", earns=2),
    M("c07-rms-eps-ignored", "rms_norm", "test_rms_norm",
      [("torch.sqrt(mean_square + eps)", "torch.sqrt(mean_square + 1e-6)")],
      "use the eps argument", earns=2),
    M("c07-rms-gamma-added", "rms_norm", "test_rms_norm",
      [("return gamma * X / torch.sqrt(mean_square + eps)",
        "return gamma + X / torch.sqrt(mean_square + eps)")],
      "gamma multiplies the normalised vector", earns=0),
    # Exercise 2: the fixed causal attention (3 checks: rows sum to 1, no future, values).
    M("c07-mask-after-softmax", "causal_attention", "test_causal_attention",
      [('scores = scores.masked_fill(~allowed, float("-inf"))             # mask BEFORE the softmax\n'
        '    weights = torch.softmax(scores, dim=-1)                          # (b, n, n): rows sum to 1',
        'weights = torch.softmax(scores, dim=-1)\n'
        '    weights = weights.masked_fill(~allowed, 0.0)')],
      "the mask is applied after the softmax", earns=0),
    M("c07-not-itself", "causal_attention", "test_causal_attention",
      [(".tril()", ".tril(-1)")], "a query may attend to itself", earns=0),
    M("c07-sees-next", "causal_attention", "test_causal_attention",
      [(".tril()", ".tril(1)")], "your mask lets it see the next key", earns=1),
    M("c07-no-sqrt-d", "causal_attention", "test_causal_attention",
      [(" / math.sqrt(d)", "")], "the scores are not scaled", earns=2),
    M("c07-softmax-over-queries", "causal_attention", "test_causal_attention",
      [("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=1)")],
      "take the softmax over the keys (the last axis)", earns=0),
    M("c07-keys-not-transposed", "causal_attention", "test_causal_attention",
      [("Q @ K.transpose(-2, -1)", "Q @ K")], "scores need Q Kᵀ", earns=0),
    # Exercise 3: predictions (4 checks: 0.75, 0.5, 0.75 and 1 point).
    M("c07-target-padding-masked", "predictions", "test_predictions",
      [("changed_by_target_padding = 2", "changed_by_target_padding = 0")],
      "the decoder is given no target lengths", earns=2.25),
    M("c07-earlier-read-it", "predictions", "test_predictions",
      [("changed_by_target_padding = 2", "changed_by_target_padding = 6")],
      "which keys may positions 0-3 read", earns=2.25),
    M("c07-padded-queries-skipped", "predictions", "test_predictions",
      [("changed_by_source_word = 7", "changed_by_source_word = 4")],
      "the source mask acts on keys", earns=2.5),
    M("c07-residual-forgotten", "predictions", "test_predictions",
      [("changed_by_source_padding = 1", "changed_by_source_padding = 0")],
      "the residual connections and the FFN carry it too", earns=2.25),
    M("c07-floor-zero", "predictions", "test_predictions",
      [("smoothed_loss_floor = (", "smoothed_loss_floor = 0 * (")],
      "which prediction minimises the", earns=2),
    M("c07-floor-uniform", "predictions", "test_predictions",
      [("smoothed_loss_floor = (", "smoothed_loss_floor = math.log(201) + 0 * (")],
      "that is the uniform prediction's loss", earns=2),
    # Exercise 4: label smoothing over a padded batch (4 checks).
    M("c07-padding-counted", "smoothed_loss", "test_smoothed_loss",
      [("return (per_token * real).sum() / real.sum()", "return per_token.mean()")],
      "the padding positions count", earns=3),
    M("c07-mean-per-sentence", "smoothed_loss", "test_smoothed_loss",
      [("return (per_token * real).sum() / real.sum()",
        "return ((per_token * real).sum(dim=1) / real.sum(dim=1)).mean()")],
      "a mean per sentence first", earns=3),
    M("c07-smoothing-over-others", "smoothed_loss", "test_smoothed_loss",
      [("per_token = -(1 - smoothing) * right - smoothing * log_probs.mean(dim=-1)",
        "per_token = -(1 - smoothing) * right - smoothing * (log_probs.sum(dim=-1) - right) "
        "/ (log_probs.shape[-1] - 1)")],
      "not ε/(V - 1)", earns=3),
    M("c07-target-over-one", "smoothed_loss", "test_smoothed_loss",
      [("per_token = -(1 - smoothing) * right", "per_token = -right")],
      "the smoothed target must sum to 1", earns=3),
    M("c07-log-softmax-over-steps", "smoothed_loss", "test_smoothed_loss",
      [("torch.log_softmax(logits, dim=-1)", "torch.log_softmax(logits, dim=1)")],
      "take the softmax over the vocabulary", earns=1),
    M("c07-no-value-error", "smoothed_loss", "test_smoothed_loss",
      [("if not 0 <= smoothing < 1:", "if False:")],
      "a smoothing outside [0, 1) must raise a ValueError", earns=3),
]

ALTERNATIVES = [
    A("rms_norm", '''def rms_norm(X, gamma, eps=1e-6):
    """X (..., d), gamma (d,) -> RMSNorm(X) (..., d), over the last axis."""
    d = X.shape[-1]
    inverse_rms = torch.rsqrt(torch.einsum("...j,...j->...", X, X) / d + eps)   # (...,)
    return X * inverse_rms.unsqueeze(-1) * gamma
'''),
    A("causal_attention", '''def causal_attention(Q, K, V):
    """Q, K (batch, n, d), V (batch, n, d_v) -> (output (batch, n, d_v), weights (batch, n, n))."""
    batch, n, d = Q.shape
    rows = []
    for i in range(n):                                   # query i sees keys 0..i only
        s = torch.einsum("bd,bjd->bj", Q[:, i], K[:, : i + 1]) / d ** 0.5   # (b, i + 1)
        w = torch.softmax(s, dim=-1)
        rows.append(torch.cat([w, Q.new_zeros(batch, n - i - 1)], dim=-1))  # (b, n)
    weights = torch.stack(rows, dim=1)                   # (b, n, n)
    return torch.einsum("bij,bjv->biv", weights, V), weights
'''),
    A("predictions", '''# Your predictions: numbers or arithmetic only (no model built, nothing run).
changed_by_target_padding = 6 - 4          # positions 4 and 5: the causal mask hides it from 0-3
changed_by_source_word = 7                 # every query, padded ones too, reads a real key
changed_by_source_padding = 1              # only its own position (residual connection)
V, eps = 201, 0.1
right, other = 1 - eps + eps / V, eps / V
smoothed_loss_floor = -(right * math.log(right) + (V - 1) * other * math.log(other))
'''),
    A("smoothed_loss", '''def smoothed_loss(logits, targets, valid_lens, smoothing=0.1):
    """logits (batch, steps, V), targets (batch, steps), valid_lens (batch,) -> one number:
    the label-smoothed cross-entropy averaged over the real tokens."""
    if smoothing < 0 or smoothing >= 1:
        raise ValueError(f"label smoothing needs 0 <= smoothing < 1, got smoothing={smoothing}")
    batch, steps, V = logits.shape
    target = torch.full_like(logits, smoothing / V)                        # (b, n, V)
    target.scatter_add_(-1, targets.long()[..., None],
                        torch.full_like(logits[..., :1], 1 - smoothing))
    log_p = logits - torch.logsumexp(logits, dim=-1, keepdim=True)         # (b, n, V)
    total, count = logits.new_zeros(()), 0
    for b in range(batch):
        n = int(valid_lens[b])
        total = total - (target[b, :n] * log_p[b, :n]).sum()
        count += n
    return total / count
'''),
]
