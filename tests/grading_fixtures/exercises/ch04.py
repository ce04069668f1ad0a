"""Lesson 4's exercises (04_bahdanau_attention): the typical mistakes its test cells name, and a
second correct answer to every exercise (see ``grading_fixtures.exercise_kit``)."""

from grading_fixtures.exercise_kit import A, M  # noqa: F401

MISTAKES = [
    # Exercise 1: the links a map predicts (checks of 0.5, 0.5 and 1 point).
    M("c04-argmax-wrong-axis", "argmax_links", "test_argmax_links",
      [("best = rows.argmax(dim=1)", "best = rows.argmax(dim=0)")],
      "the argmax ran over the wrong axis", earns=0),
    M("c04-argmax-as-drawn", "argmax_links", "test_argmax_links",
      [("word_columns = [e for e, token in enumerate(english) if token not in PUNCTUATION]",
        "word_columns = list(range(len(english) + 1))")],
      "the argmax ran over every column, as a heat map draws it", earns=1),
    M("c04-eos-row-linked", "argmax_links", "test_argmax_links",
      [("rows = weights[:len(french), word_columns]", "rows = weights[:, word_columns]"),
       ("for f, token in enumerate(french)", "for f, token in enumerate(french + [EOS])"),
       ("if token not in PUNCTUATION and token != EOS]", "if token not in PUNCTUATION]")],
      "the <eos> row got a link", earns=1.5),
    M("c04-punctuation-linked", "argmax_links", "test_argmax_links",
      [("if token not in PUNCTUATION and token != EOS]", "if token != EOS]")],
      "French punctuation got a link", earns=1.5),
    # Exercise 2: top-1 and AER (checks of 0.5, 0.5 and 1 point).
    M("c04-top1-sure-only", "alignment_scores", "test_alignment_scores",
      [("top1 = len(A & P) / len(A)", "top1 = len(A & S) / len(A)")],
      "top-1 counted only the sure links", earns=1.5),
    M("c04-aer-possible-denominator", "alignment_scores", "test_alignment_scores",
      [("(len(A) + len(S))", "(len(A) + len(P))")],
      "the denominator holds |P|", earns=1.5),
    M("c04-aer-one-minus-top1", "alignment_scores", "test_alignment_scores",
      [("aer = 1 - (len(A & S) + len(A & P)) / (len(A) + len(S))", "aer = 1 - top1")],
      "AER is not 1 − top-1", earns=1.5),
    M("c04-scores-unfiltered", "alignment_scores", "test_alignment_scores",
      [("scored = {f for f in gold_words if french[f] not in PUNCTUATION and french[f] != EOS}",
        "scored = set(range(len(french)))")],
      "nothing was left out", earns=1),
    M("c04-punctuation-scored", "alignment_scores", "test_alignment_scores",
      [("scored = {f for f in gold_words if french[f] not in PUNCTUATION and french[f] != EOS}",
        "scored = gold_words")],
      "the French '.' was scored", earns=1),
    # Exercise 3 (find and fix, bug class teacher-forcing-unshifted): 2 checks of 1.5 points.
    M("c04-teacher-forcing-unshifted", "teacher_forced_loss", "test_teacher_forced_loss",
      [("        logits, state = decoder_step(decoder, tokens, state)         # (b, V): predicts Y[:, t]",
        "        tokens = Y[:, t]\n        logits, state = decoder_step(decoder, tokens, state)")],
      "each step read the word it must predict", earns=0),
    M("c04-first-step-wraps", "teacher_forced_loss", "test_teacher_forced_loss",
      [("    tokens = torch.full((b,), bos, dtype=torch.long)               # what the first step reads",
        "    tokens = Y[:, -1]")],
      "the first step read the last target word", earns=0),
    M("c04-loss-counts-padding", "teacher_forced_loss", "test_teacher_forced_loss",
      [("    return total / Y_valid_len.sum()", "    return total / Y.numel()")],
      "the mean ran over every position, padding included", earns=1.5),
    M("c04-loss-sums-padding", "teacher_forced_loss", "test_teacher_forced_loss",
      [("total = total + (token_loss * (t < Y_valid_len)).sum()", "total = total + token_loss.sum()")],
      "padded positions added their loss to the sum", earns=1.5),
    # Exercise 4: greedy decoding of a batch (3 checks of 1 point).
    M("c04-greedy-always-bos", "greedy_batch", "test_greedy_batch",
      [("logits, state = decoder_step(decoder, tokens, state)",
        "logits, state = decoder_step(decoder, torch.full((b,), bos, dtype=torch.long), state)")],
      "every step was fed <bos>", earns=0),
    M("c04-greedy-batch-stops", "greedy_batch", "test_greedy_batch",
      [("        if all(finished):", "        if any(finished):")],
      "the whole batch stopped at the first <eos>", earns=0),
    M("c04-greedy-eos-kept", "greedy_batch", "test_greedy_batch",
      [("                    finished[i] = True",
        "                    finished[i] = True\n                    outputs[i].append(int(tokens[i]))")],
      "the <eos> was kept in the list", earns=0),
    # Exercise 5 (predict): 4 checks of 1 point.
    M("c04-predict-top1-zero", "predictions", "test_predictions",
      [("predicted_top1 = 1 / 6", "predicted_top1 = 0.0")],
      "the argmax runs over English words only", earns=3),
    M("c04-predict-aer-zero", "predictions", "test_predictions",
      [("predicted_aer = 1 / 3", "predicted_aer = 0.0")],
      "an argmax picks one English word per French word", earns=3),
    M("c04-predict-bleu-unclipped", "predictions", "test_predictions",
      [("predicted_bleu = 0.8 ** 0.5 * 0.75 ** 0.25", "predicted_bleu = 1.0 ** 0.5 * 0.75 ** 0.25")],
      "the repeated 'est' was counted twice in p1", earns=3),
    M("c04-predict-guided-bits", "predictions", "test_predictions",
      [("predicted_guided = 5.5 * 0.6931", "predicted_guided = 5.5")],
      "that is the loss in bits", earns=3),
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
    A("teacher_forced_loss", '''
def teacher_forced_loss(decoder, state, Y, Y_valid_len, bos):
    """The inputs built first (<bos>, then Y shifted right), the losses stacked, one mask."""
    import torch.nn.functional as F
    b, T = Y.shape
    inputs = torch.cat([torch.full((b, 1), bos, dtype=torch.long), Y[:, :-1].long()], dim=1)
    losses = []
    for t in range(T):
        logits, state = decoder_step(decoder, inputs[:, t], state)
        losses.append(F.cross_entropy(logits, Y[:, t].long(), reduction="none"))
    losses = torch.stack(losses, dim=1)                                 # (b, T)
    real = torch.arange(T)[None, :] < Y_valid_len[:, None]              # (b, T)
    return torch.where(real, losses, torch.zeros_like(losses)).sum() / real.sum()
'''),
    A("greedy_batch", '''
def greedy_batch(decoder, state, bos, eos, max_steps):
    """Vectorised: a tensor of choices and a `done` mask; the lists are cut at the end."""
    b = state.shape[0]
    tokens = torch.full((b,), bos, dtype=torch.long)
    done = torch.zeros(b, dtype=torch.bool)
    chosen = []
    while len(chosen) < max_steps and not bool(done.all()):
        logits, state = decoder_step(decoder, tokens, state)
        tokens = logits.argmax(dim=-1)
        chosen.append(torch.where(done, torch.full_like(tokens, eos), tokens))
        done = done | (tokens == eos)
    result = []
    for i in range(b):
        row = [int(c[i]) for c in chosen]
        result.append(row[:row.index(eos)] if eos in row else row)
    return result
'''),
    A("predictions", '''
# Worked out by hand: table is the only right word; j'ai and l'argent miss one sure link each;
# BLEU: p1 = 0.8, p2 = 0.75, no brevity penalty; guided: 1.5 + 0 + 1 + 1 + 2 times ln 2.
predicted_top1, predicted_aer = 0.167, 0.333
predicted_bleu = 0.832
predicted_guided = 3.81
'''),
]
