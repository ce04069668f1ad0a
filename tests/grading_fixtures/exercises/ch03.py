"""Lesson 3's exercises (03_scoring_functions): the typical mistakes its test cells name, and a
second correct answer to every exercise (see ``grading_fixtures.exercise_kit``)."""

from grading_fixtures.exercise_kit import A, M  # noqa: F401

MISTAKES = [
    # Exercise 1 (predict): the √d argument on cases the lesson did not run.
    M("c03-predict-std-before-scaling", "sqrt_d_predictions", "test_sqrt_d_predictions",
      [("score_std = 21 / 7", "score_std = 21")],
      "before the division by √d", earns=3),
    M("c03-predict-scaling-normalises", "sqrt_d_predictions", "test_sqrt_d_predictions",
      [("score_std = 21 / 7", "score_std = 1.0")],
      "has spread 1 only when the entries have variance 1", earns=3),
    M("c03-predict-own-key-like-random", "sqrt_d_predictions", "test_sqrt_d_predictions",
      [("own_key_weight = 1 / (1 + 9 * math.exp(0.5 - 8))", "own_key_weight = 0.33")],
      "the largest weight of a random query", earns=3),
    M("c03-predict-jacobian-diagonal-only", "sqrt_d_predictions", "test_sqrt_d_predictions",
      [("jacobian_uniform = math.sqrt(5 - 1) / 5", "jacobian_uniform = math.sqrt(5) / 5"),
       ("jacobian_pair = math.sqrt(4 / 16)", "jacobian_pair = math.sqrt(2) / 2")],
      "that is the norm of diag(α) alone", earns=2),
    M("c03-predict-jacobian-squared", "sqrt_d_predictions", "test_sqrt_d_predictions",
      [("jacobian_pair = math.sqrt(4 / 16)", "jacobian_pair = 4 / 16")],
      "the norm is its square root", earns=3),
    M("c03-predict-pair-like-one-hot", "sqrt_d_predictions", "test_sqrt_d_predictions",
      [("jacobian_pair = math.sqrt(4 / 16)", "jacobian_pair = 0.0")],
      "only a one-hot row has a zero Jacobian", earns=3),

    # Exercise 2 (variant): additive attention with one valid length per query.
    M("c03-add-no-tanh", "additive_attention", "test_additive_attention",
      [("torch.tanh((queries @ W_q.T)", "((queries @ W_q.T)")],
      "the scores skip the tanh", earns=3),
    M("c03-add-mask-after-softmax", "additive_attention", "test_additive_attention",
      [("torch.softmax(scores.masked_fill(~keep, -1e6), dim=-1)", "torch.softmax(scores, dim=-1)")],
      "the mask is applied after the softmax", earns=3),
    M("c03-add-one-key-too-many", "additive_attention", "test_additive_attention",
      [("< valid_lens[..., None]", "<= valid_lens[..., None]")],
      "each query sees one key too many", earns=2),
    M("c03-add-softmax-over-queries", "additive_attention", "test_additive_attention",
      [("scores.masked_fill(~keep, -1e6), dim=-1)", "scores.masked_fill(~keep, -1e6), dim=1)")],
      "the softmax runs over the queries", earns=2),
    M("c03-add-inf-fill-nan", "additive_attention", "test_additive_attention",
      [("masked_fill(~keep, -1e6)", "masked_fill(~keep, float('-inf'))"),
       ("weights = weights.masked_fill(~keep, 0.0)", "pass")],
      "a query with valid length 0 gets NaN", earns=3),
    M("c03-add-empty-row-uniform", "additive_attention", "test_additive_attention",
      [("weights = weights.masked_fill(~keep, 0.0)", "pass")],
      "a query with valid length 0 gets uniform weights", earns=3),
    M("c03-add-keys-not-projected-with-transpose", "additive_attention", "test_additive_attention",
      [("(keys @ W_k.T)", "(keys @ W_k)")],
      "project with the transposed matrices", earns=1),
    M("c03-add-no-length-check", "additive_attention", "test_additive_attention",
      [("if tuple(valid_lens.shape) != (batch, m):", "if False:"),
       ("if (valid_lens < 0).any() or (valid_lens > n).any():", "if False:")],
      "raise a ValueError that names valid_lens", earns=3),
    M("c03-add-error-without-name", "additive_attention", "test_additive_attention",
      [('f"valid_lens must have shape', 'f"the lengths must have shape'),
       ('f"valid_lens must lie in', 'f"the lengths must lie in')],
      "your message does not name valid_lens", earns=3),

    # Exercise 3 (find and fix): lengths tiled instead of repeated in a flattened masked softmax.
    # The draft unchanged: every check runs lengths that differ between sequences, so it earns 0.
    M("c03-fix-still-tiled", "padded_attention", "test_padded_attention",
      [("valid_lens.repeat_interleave(m)", "valid_lens.repeat(m)")],
      "the lengths are tiled, not repeated"),
    M("c03-fix-2d-branch-broken", "padded_attention", "test_padded_attention",
      [("lens = valid_lens.reshape(-1)", "lens = valid_lens.T.reshape(-1)")],
      "outputs (query i of sequence b must average the", earns=2.5),
    M("c03-fix-keys-not-transposed", "padded_attention", "test_padded_attention",
      [("queries @ keys.transpose(1, 2)", "queries @ keys")],
      "scores need Q Kᵀ: transpose the keys' last two axes"),
    M("c03-fix-scaled-by-sqrt-n", "padded_attention", "test_padded_attention",
      [("/ math.sqrt(d)", "/ math.sqrt(n)")],
      "the scores are divided by √n", earns=2),
    M("c03-fix-not-scaled", "padded_attention", "test_padded_attention",
      [("/ math.sqrt(d)", "")],
      "the scores are not scaled", earns=2),

    # Exercise 4 (variant): valid lengths that hide padding and the future at once.
    M("c03-dec-causal-off-by-one", "decoder_lengths", "test_decoder_lengths",
      [("torch.arange(1, tokens.shape[1] + 1, device=tokens.device)",
        "torch.arange(tokens.shape[1], device=tokens.device)")],
      "causal lengths are off by one"),
    M("c03-dec-padding-not-hidden", "decoder_lengths", "test_decoder_lengths",
      [("return torch.minimum(causal[None, :], real[:, None])",
        "return causal[None, :].repeat(tokens.shape[0], 1)")],
      "padding is not hidden", earns=1),
    M("c03-dec-pad-id-assumed-0", "decoder_lengths", "test_decoder_lengths",
      [("(tokens != pad_id)", "(tokens != 0)")],
      "pad_id is not 0 here", earns=2),
    M("c03-dec-padding-queries-get-0", "decoder_lengths", "test_decoder_lengths",
      [("return torch.minimum(causal[None, :], real[:, None])",
        "return torch.where(tokens != pad_id, causal[None, :], 0)")],
      "its weights must still sum to 1", earns=1),
]

ALTERNATIVES = [
    A("sqrt_d_predictions", """\
# Each term q_j k_j has variance 1 * 3**2; 49 of them, then divided by sqrt(49).
score_std = math.sqrt(49 * 9) / math.sqrt(49)
# Scaled self-score sqrt(64) = 8 against spread-1 scores: practically all the weight.
own_key_weight = 0.99
# Frobenius norm of diag(a) - a a^T, written out entry by entry.
jacobian_uniform = math.sqrt(5 * (0.2 - 0.04) ** 2 + 20 * 0.04 ** 2)
jacobian_pair = math.sqrt(2 * 0.25 ** 2 + 2 * 0.25 ** 2)
"""),
    A("additive_attention", '''\
def additive_attention(queries, keys, values, W_q, W_k, w_v, valid_lens):
    """Additive attention, one valid length per query (a loop over the rows for the softmax)."""
    n = keys.shape[1]
    if valid_lens.dim() != 2 or valid_lens.shape != queries.shape[:2]:
        raise ValueError(f"valid_lens has shape {tuple(valid_lens.shape)}; "
                         f"expected (batch, m) = {tuple(queries.shape[:2])}")
    if valid_lens.numel() and (valid_lens.min() < 0 or valid_lens.max() > n):
        raise ValueError(f"valid_lens out of the range 0..{n}")
    hq = torch.einsum("bmq,hq->bmh", queries, W_q)
    hk = torch.einsum("bnk,hk->bnh", keys, W_k)
    scores = torch.einsum("bmnh,h->bmn", torch.tanh(hq.unsqueeze(2) + hk.unsqueeze(1)), w_v)
    weights = torch.zeros_like(scores)
    for b in range(scores.shape[0]):
        for i in range(scores.shape[1]):
            length = int(valid_lens[b, i])
            if length > 0:
                weights[b, i, :length] = torch.softmax(scores[b, i, :length], dim=0)
    return torch.einsum("bmn,bnv->bmv", weights, values), weights
'''),
    A("padded_attention", '''\
def padded_attention(queries, keys, values, valid_lens):
    """Scaled dot-product attention over a padded batch, without flattening."""
    batch, m, d = queries.shape
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None].expand(batch, m)          # every query of sequence b
    scores = torch.einsum("bmd,bnd->bmn", queries, keys) / d ** 0.5
    visible = torch.arange(keys.shape[1])[None, None, :] < valid_lens[:, :, None]
    scores = torch.where(visible, scores, torch.full_like(scores, float("-inf")))
    return torch.einsum("bmn,bnv->bmv", torch.softmax(scores, dim=-1), values)
'''),
    A("decoder_lengths", '''\
def decoder_lengths(tokens, pad_id):
    """One loop per query: min(i + 1, number of real tokens)."""
    batch, steps = tokens.shape
    lengths = torch.empty(batch, steps, dtype=torch.long)
    for b in range(batch):
        n_real = int((tokens[b] != pad_id).sum())
        for i in range(steps):
            lengths[b, i] = min(i + 1, n_real)
    return lengths
'''),
]
