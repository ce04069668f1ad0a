"""Lesson 3's exercises (03_scoring_functions): the typical mistakes its test cells name, and a
second correct answer to every exercise (see ``grading_fixtures.exercise_kit``)."""

from grading_fixtures.exercise_kit import A, M  # noqa: F401

MISTAKES = [
    # Exercise 1 (predict): the entropy of one query's weights as its valid length shrinks.
    M("c03-predict-uniform-at-5", "predict_entropy", "test_predict_entropy",
      [("entropy_at_5 = 0.03", "entropy_at_5 = math.log(5)")],
      "nearly one-hot: key 4 scores 7 more than the others", earns=1),
    M("c03-predict-in-bits", "predict_entropy", "test_predict_entropy",
      [("entropy_at_4 = math.log(4)", "entropy_at_4 = math.log2(4)"),
       ("entropy_at_2 = math.log(2)", "entropy_at_2 = math.log2(2)")],
      "is in bits (log base 2)", earns=1),
    M("c03-predict-no-renormalising", "predict_entropy", "test_predict_entropy",
      [("entropy_at_4 = math.log(4)", "entropy_at_4 = 0.01")],
      "shares all of the weight out again", earns=1),
    M("c03-predict-one-key-too-many", "predict_entropy", "test_predict_entropy",
      [("entropy_at_2 = math.log(2)", "entropy_at_2 = math.log(3)")],
      "counts one key too many", earns=1),

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
    M("c03-fix-still-tiled", "padded_attention", "test_padded_attention",
      [("valid_lens.repeat_interleave(m)", "valid_lens.repeat(m)")],
      "the lengths are tiled, not repeated", earns=1.5),
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
    A("predict_entropy", """\
# Key 4 outscores the others by 7: weight 1 / (1 + 4 e^-7), almost all of it.
entropy_at_5 = 0.0
# Masking key 4 leaves equal scores: uniform weights, entropy ln L.
entropy_at_4 = 1.386
entropy_at_2 = 0.693
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
