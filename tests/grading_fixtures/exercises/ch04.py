"""Lesson 4's exercises (04_bahdanau_attention): the typical mistakes its test cells name, and a
second correct answer to every exercise (see ``grading_fixtures.exercise_kit``)."""

from grading_fixtures.exercise_kit import A, M  # noqa: F401

MISTAKES = [
    M("c4-no-mask", "step_context", "test_step_context",
      [("torch.softmax(scores.masked_fill(~keep, -1e6), dim=-1).masked_fill(~keep, 0.0)",
        "torch.softmax(scores, dim=-1)")],
      "the padded steps of sentence 1 got weight"),
    M("c4-mask-after-softmax", "step_context", "test_step_context",
      [("torch.softmax(scores.masked_fill(~keep, -1e6), dim=-1)", "torch.softmax(scores, dim=-1)")],
      "the mask is applied after the softmax"),
    M("c4-no-brevity-penalty", "sentence_bleu", "test_sentence_bleu",
      [("score = math.exp(min(0.0, 1 - len(label_tokens) / len(pred_tokens)))", "score = 1.0")],
      "multiply by the brevity penalty"),
    M("c4-no-clipping", "sentence_bleu", "test_sentence_bleu",
      [("sum(min(c, label_counts[gram]) for gram, c in pred_counts.items())",
        "sum(c for gram, c in pred_counts.items() if gram in label_counts)")],
      "it can match only once"),
    M("c4-ties-cross", "count_crossings", "test_count_crossings",
      [("if positions[i] > positions[j])", "if positions[i] >= positions[j])")],
      "count p_i > p_i', not >="),
    M("c4-neighbours-only", "count_crossings", "test_count_crossings",
      [("for j in range(i + 1, len(positions))", "for j in range(i + 1, min(i + 2, len(positions)))")],
      "only neighbouring steps were compared"),
    M("c4-argmax-wrong-axis", "count_crossings", "test_count_crossings",
      [("weights.argmax(dim=1)", "weights.argmax(dim=0)")],
      "p_i is the argmax of row i over the source tokens"),
]

ALTERNATIVES = [
]
