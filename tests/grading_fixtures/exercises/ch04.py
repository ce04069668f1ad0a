"""Lesson 4's exercises (04_bahdanau_attention): the typical mistakes its test cells name, and a
second correct answer to every exercise (see ``grading_fixtures.exercise_kit``)."""

from grading_fixtures.exercise_kit import A, M  # noqa: F401

MISTAKES = [
    # Exercise 1: the links a map predicts (3 checks of 1 point).
    M("c04-argmax-wrong-axis", "argmax_links", "test_argmax_links",
      [("best = rows.argmax(dim=1)", "best = rows.argmax(dim=0)")],
      "the argmax ran over the wrong axis", earns=0),
    M("c04-argmax-as-drawn", "argmax_links", "test_argmax_links",
      [("word_columns = [e for e, token in enumerate(english) if token not in PUNCTUATION]",
        "word_columns = list(range(len(english) + 1))")],
      "the argmax ran over every column, as a heat map draws it", earns=2),
    M("c04-eos-row-linked", "argmax_links", "test_argmax_links",
      [("rows = weights[:len(french), word_columns]", "rows = weights[:, word_columns]"),
       ("for f, token in enumerate(french)", "for f, token in enumerate(french + [EOS])"),
       ("if token not in PUNCTUATION and token != EOS]", "if token not in PUNCTUATION]")],
      "the <eos> row got a link", earns=2),
    M("c04-punctuation-linked", "argmax_links", "test_argmax_links",
      [("if token not in PUNCTUATION and token != EOS]", "if token != EOS]")],
      "French punctuation got a link", earns=2),
    # Exercise 2: top-1 and AER (3 checks of 1 point).
    M("c04-top1-sure-only", "alignment_scores", "test_alignment_scores",
      [("top1 = len(A & P) / len(A)", "top1 = len(A & S) / len(A)")],
      "top-1 counted only the sure links", earns=2),
    M("c04-aer-possible-denominator", "alignment_scores", "test_alignment_scores",
      [("(len(A) + len(S))", "(len(A) + len(P))")],
      "the denominator holds |P|", earns=2),
    M("c04-aer-one-minus-top1", "alignment_scores", "test_alignment_scores",
      [("aer = 1 - (len(A & S) + len(A & P)) / (len(A) + len(S))", "aer = 1 - top1")],
      "AER is not 1 − top-1", earns=2),
    M("c04-scores-unfiltered", "alignment_scores", "test_alignment_scores",
      [("scored = {f for f in gold_words if french[f] not in PUNCTUATION and french[f] != EOS}",
        "scored = set(range(len(french)))")],
      "nothing was left out", earns=2),
    M("c04-punctuation-scored", "alignment_scores", "test_alignment_scores",
      [("scored = {f for f in gold_words if french[f] not in PUNCTUATION and french[f] != EOS}",
        "scored = gold_words")],
      "the French '.' was scored", earns=2),
    # Exercise 3 (find and fix): 2 checks of 1.5 points.
    M("c04-lengths-tiled", "all_step_weights", "test_all_step_weights",
      [("valid_len.repeat_interleave(T)", "valid_len.repeat(T)")],
      "the lengths are tiled", earns=0),
    M("c04-mask-after-softmax", "all_step_weights", "test_all_step_weights",
      [("weights = torch.softmax(scores.masked_fill(padding, -1e6), dim=-1)",
        "weights = torch.softmax(scores, dim=-1).masked_fill(padding, 0.0)")],
      "the mask is applied after the softmax", earns=1.5),
    M("c04-keys-tiled", "all_step_weights", "test_all_step_weights",
      [("enc_outputs.repeat_interleave(T, dim=0)", "enc_outputs.repeat(T, 1, 1)")],
      "the encoder outputs are tiled", earns=1.5),
    # Exercise 4 (predict): 2 checks of 1 point.
    M("c04-predict-top1-zero", "predictions", "test_predictions",
      [("predicted_top1 = 1 / 6", "predicted_top1 = 0.0")],
      "the argmax runs over English words only", earns=1),
    M("c04-predict-aer-zero", "predictions", "test_predictions",
      [("predicted_aer = 1 / 3", "predicted_aer = 0.0")],
      "an argmax picks one English word per French word", earns=1),
]

ALTERNATIVES = [
    A("argmax_links", '''
def argmax_links(weights, english, french):
    """A loop over the rows, keeping the best English word by hand."""
    links = []
    for f in range(len(french)):
        if french[f] in PUNCTUATION or french[f] == EOS:
            continue
        best_e, best_w = None, None
        for e in range(len(english)):
            if english[e] in PUNCTUATION:
                continue
            w = float(weights[f, e])
            if best_w is None or w > best_w:
                best_e, best_w = e, w
        links.append((best_e, f))
    return links
'''),
    A("alignment_scores", '''
def alignment_scores(links, sure, possible, french):
    """Counting with loops and membership tests instead of set algebra."""
    def scored(f):
        return (french[f] not in PUNCTUATION and french[f] != "<eos>"
                and any(pf == f for _, pf in possible))

    possible_set = set(map(tuple, possible))
    sure_set = set(map(tuple, sure))
    predicted = [tuple(link) for link in links if scored(link[1])]
    n_sure = sum(1 for link in sure_set if scored(link[1]))
    in_p = sum(1 for link in predicted if link in possible_set)
    in_s = sum(1 for link in predicted if link in sure_set)
    return in_p / len(predicted), 1.0 - (in_s + in_p) / (len(predicted) + n_sure)
'''),
    A("all_step_weights", '''
def all_step_weights(queries, enc_outputs, valid_len, W_q, W_k, w_v):
    """No flattening: broadcast (b, T, 1, a) against (b, 1, S, a) and mask with torch.where."""
    q_part = torch.einsum("btq,aq->bta", queries, W_q)[:, :, None, :]       # (b, T, 1, a)
    k_part = torch.einsum("bsh,ah->bsa", enc_outputs, W_k)[:, None, :, :]   # (b, 1, S, a)
    scores = torch.einsum("btsa,a->bts", torch.tanh(q_part + k_part), w_v)  # (b, T, S)
    positions = torch.arange(enc_outputs.shape[1])
    valid = (positions[None, :] < valid_len[:, None])[:, None, :]          # (b, 1, S)
    scores = torch.where(valid, scores, torch.full_like(scores, float("-inf")))
    return torch.softmax(scores, dim=-1)
'''),
    A("predictions", '''
# Worked out by hand: table is the only right word; j'ai and l'argent miss one sure link each.
predicted_top1, predicted_aer = 0.167, 0.333
'''),
]
