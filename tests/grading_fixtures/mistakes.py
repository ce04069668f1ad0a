"""Typical wrong answers to the exercises, one per mistake the test cells diagnose.

Each ``Mistake`` rewrites one solution cell of a chapter's instructor notebook (plain text
replacements in the instructor's own solution) so that it makes exactly that mistake, and says
which test cell must fail and which words its feedback must show. tests/test_feedback_diagnoses.py
grades one submission per mistake through the real CLI.
"""

from typing import NamedTuple


class Mistake(NamedTuple):
    name: str            # student id of the submission, unique across chapters
    solution: str        # grade_id of the solution cell rewritten
    test: str            # grade_id of the test cell that must fail (all others pass)
    edits: tuple         # (old, new) text replacements in the instructor's solution
    diagnosis: str       # words the feedback must show
    # Test cells of later exercises whose answers call the rewritten function: they fail too
    # (a wrong scaled_scores makes attention_weights wrong), as they would for a real student.
    downstream: tuple = ()
    downstream_says: tuple = ()   # words the feedback of those later cells must show


def M(name, solution, test, edits, diagnosis, downstream=(), downstream_says=()):
    return Mistake(name, solution, test, tuple(edits), diagnosis, tuple(downstream),
                   tuple(downstream_says))


_USES_SCORES = ("test_attention_weights", "test_attend")       # lesson 1: both call scaled_scores
_BLAMES_1 = "but scaled_scores (exercise 1) is wrong: fix it first"
_BLAMES_2 = "but attention_weights (exercise 2) is wrong: fix it first"


MISTAKES = {
    "01_attention_cues": [
        M("c1-no-sqrt-d", "scaled_scores", "test_scaled_scores",
          [("/ math.sqrt(d)", "")], "the scores are not scaled", _USES_SCORES,
          [_BLAMES_1, _BLAMES_2]),
        M("c1-divide-by-d", "scaled_scores", "test_scaled_scores",
          [("/ math.sqrt(d)", "/ d")], "you divided by d", _USES_SCORES,
          [_BLAMES_1, _BLAMES_2]),
        M("c1-softmax-queries", "attention_weights", "test_attention_weights",
          [("scores = scores - scores.max(dim=-1, keepdim=True).values      # keeps exp finite\n"
            "    exp_scores = torch.exp(scores)\n"
            "    return exp_scores / exp_scores.sum(dim=-1, keepdim=True)",
            "return torch.softmax(scores, dim=1)")],
          "each row sums to 1 over the queries, not the keys", ["test_attend"], [_BLAMES_2]),
        M("c1-times-temperature", "attention_weights", "test_attention_weights",
          [("scaled_scores(queries, keys) / temperature", "scaled_scores(queries, keys) * temperature")],
          "divide the scores by the temperature, do not multiply", ["test_attend"],
          [_BLAMES_2]),
        M("c1-swapped-pair", "attend", "test_attend",
          [("return weights @ values, weights", "return weights, weights @ values")],
          "return the pair (outputs, weights), in that order"),
        M("c1-temperature-dropped", "attend", "test_attend",
          [("attention_weights(queries, keys, temperature)", "attention_weights(queries, keys)")],
          "attend ignores its temperature"),
        M("c1-query-no-sqrt-d", "query_for_weights", "test_query_for_weights",
          [("math.sqrt(d) * temperature * target_scores", "temperature * target_scores")],
          "too flat: the softmax divides"),
        M("c1-query-no-temperature", "query_for_weights", "test_query_for_weights",
          [("math.sqrt(d) * temperature * target_scores", "math.sqrt(d) * target_scores")],
          "your query ignores the temperature"),
    ],
    "02_attention_pooling": [
        M("c2-softmax-queries", "gaussian_nadaraya_watson", "test_gaussian_nadaraya_watson",
          [("torch.softmax(scores, dim=1)", "torch.softmax(scores, dim=0)")],
          "each column sums to 1 over the queries"),
        M("c2-no-two", "gaussian_nadaraya_watson", "test_gaussian_nadaraya_watson",
          [("/ (2 * sigma ** 2)", "/ sigma ** 2")], "you left out the 2"),
        M("c2-no-clamp", "epanechnikov_weights", "test_epanechnikov_weights",
          [("torch.clamp(1 - u ** 2, min=0.0)", "1 - u ** 2")], "negative kernel values"),
        M("c2-no-sigma", "epanechnikov_weights", "test_epanechnikov_weights",
          [("x_keys[None, :]) / sigma", "x_keys[None, :])")],
          "divide the distances by sigma before the kernel"),
        M("c2-self-included", "leave_one_out_errors", "test_leave_one_out_errors",
          [("scores.masked_fill(self_pair, -math.inf)", "scores")], "itself included",
          ["test_best_sigma"]),                      # best_sigma calls leave_one_out_errors
        M("c2-summed", "leave_one_out_errors", "test_leave_one_out_errors",
          [("((weights @ y - y) ** 2).mean()", "((weights @ y - y) ** 2).sum()")],
          "average the squared errors over the n points"),
        M("c2-argmax", "best_sigma", "test_best_sigma",
          [(".argmin()", ".argmax()")], "largest leave-one-out error"),
        M("c2-training-error", "best_sigma", "test_best_sigma",
          [("candidates[int(leave_one_out_errors(x_train, y_train, candidates).argmin())]",
            "min(candidates, key=lambda s: float(((gaussian_nadaraya_watson(\n"
            "    x_train, x_train, y_train, s)[0] - y_train) ** 2).mean()))")],
          "always wins on the training error"),
    ],
    "03_scoring_functions": [
        M("c3-mask-after-softmax", "masked_softmax_2d", "test_masked_softmax_2d",
          [("torch.softmax(scores.masked_fill(~keep, -1e6), dim=-1)", "torch.softmax(scores, dim=-1)")],
          "the mask is applied after the softmax"),
        M("c3-one-key-too-many", "masked_softmax_2d", "test_masked_softmax_2d",
          [("< valid_lens[..., None]", "<= valid_lens[..., None]")], "one key too many"),
        M("c3-w-transposed", "bilinear_scores", "test_bilinear_scores",
          [("queries @ W @ keys", "queries @ W.T @ keys")], "you used W transposed"),
        M("c3-keys-first", "bilinear_scores", "test_bilinear_scores",
          [("queries @ W @ keys.transpose(1, 2)", "keys @ W.T @ queries.transpose(1, 2)")],
          "your scores are (batch, keys, queries): put the queries first"),
        M("c3-no-tanh", "additive_scores", "test_additive_scores",
          [("torch.tanh(projected_q", "(projected_q")], "go through tanh before w_v"),
        M("c3-broadcast-swapped", "additive_scores", "test_additive_scores",
          [("projected_q[:, :, None, :] + projected_k[:, None, :, :]",
            "projected_q[:, None, :, :] + projected_k[:, :, None, :]")],
          "add the queries as (batch, m, 1, h)"),
        M("c3-causal-off-by-one", "decoder_lengths", "test_decoder_lengths",
          [("torch.arange(1, tokens.shape[1] + 1, device=tokens.device)",
            "torch.arange(tokens.shape[1], device=tokens.device)")],
          "causal lengths are off by one"),
        M("c3-padding-not-hidden", "decoder_lengths", "test_decoder_lengths",
          [("return torch.minimum(causal[None, :], real[:, None])",
            "return causal[None, :].repeat(tokens.shape[0], 1)")],
          "padding is not hidden"),
    ],
    "04_bahdanau_attention": [
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
    ],
    "05_multihead_attention": [
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
    ],
    "06_self_attention_positional_encoding": [
        M("c6-sin-cos-swapped", "sinusoidal_table", "test_sinusoidal_table",
          [("= torch.sin(angles), torch.cos(angles)", "= torch.cos(angles), torch.sin(angles)")],
          "sin and cos are swapped"),
        M("c6-two-halves", "sinusoidal_table", "test_sinusoidal_table",
          [("grid[:, 0::2], grid[:, 1::2] = torch.sin(angles), torch.cos(angles)",
            "grid = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)")],
          "must alternate column by column"),
        M("c6-exponent-j", "sinusoidal_table", "test_sinusoidal_table",
          [("-torch.arange(0, dim, 2, dtype=torch.float64) / dim",
            "-torch.arange(dim // 2, dtype=torch.float64) / dim")],
          "wrong frequencies"),
        M("c6-rotation-transposed", "shift_rotation", "test_shift_rotation",
          [("torch.stack([torch.cos(a), torch.sin(a)])", "torch.stack([torch.cos(a), -torch.sin(a)])"),
           ("torch.stack([-torch.sin(a), torch.cos(a)])", "torch.stack([torch.sin(a), torch.cos(a)])")],
          "your matrix shifts by -delta"),
        M("c6-one-angle", "shift_rotation", "test_shift_rotation",
          [("turn = delta * base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)",
            "turn = torch.full((dim // 2,), float(delta), dtype=torch.float64)")],
          "every block turns by the same angle"),
        M("c6-no-sqrt-d", "causal_self_attention", "test_causal_self_attention",
          [("(X @ X.transpose(1, 2)) / math.sqrt(d)", "(X @ X.transpose(1, 2))")],
          "the scores are not scaled"),
        M("c6-diagonal-masked", "causal_self_attention", "test_causal_self_attention",
          [(".triu(1)", ".triu(0)")], "token i may attend to itself"),
    ],
    "07_transformer": [
        M("c7-unbiased-variance", "add_norm", "test_add_norm",
          [("var = ((S - mean) ** 2).mean(dim=-1, keepdim=True)", "var = S.var(dim=-1, keepdim=True)")],
          "use the biased variance"),
        M("c7-over-steps", "add_norm", "test_add_norm",
          [("mean = S.mean(dim=-1, keepdim=True)", "mean = S.mean(dim=1, keepdim=True)"),
           ("((S - mean) ** 2).mean(dim=-1, keepdim=True)", "((S - mean) ** 2).mean(dim=1, keepdim=True)")],
          "not over the steps"),
        M("c7-no-residual", "add_norm", "test_add_norm",
          [("S = X + Y", "S = Y")], "normalise the sum X + Y"),
        M("c7-new-tokens-first", "cached_causal_mask", "test_cached_causal_mask",
          [("torch.arange(num_keys - num_queries, num_keys)", "torch.arange(num_queries)")],
          "the new tokens are the last num_queries positions"),
        M("c7-not-itself", "cached_causal_mask", "test_cached_causal_mask",
          [("<= positions[:, None]", "< positions[:, None]")], "each query may attend to itself"),
        M("c7-no-ffn-biases", "encoder_block_parameter_count", "test_encoder_block_parameter_count",
          [("ffn = d * f + f + f * d + d", "ffn = d * f + f * d")],
          "the FFN's two linear layers always have biases"),
        M("c7-no-norms", "encoder_block_parameter_count", "test_encoder_block_parameter_count",
          [("norms = 2 * 2 * d", "norms = 0")], "each of the two layer norms"),
    ],
    "08_language_model": [
        M("c8-not-itself", "causal_padding_mask", "test_causal_padding_mask",
          [("positions[None, :] <= positions[:, None]", "positions[None, :] < positions[:, None]")],
          "each token may attend to itself"),
        M("c8-padding-kept", "causal_padding_mask", "test_causal_padding_mask",
          [("return not_future[None, :, :] & real_key[:, None, :]",
            "return not_future[None, :, :].expand(len(valid_lens), -1, -1)")],
          "the padding keys are not masked"),
        M("c8-transposed", "causal_padding_mask", "test_causal_padding_mask",
          [("positions[None, :] <= positions[:, None]", "positions[None, :] >= positions[:, None]")],
          "the mask is transposed"),
        M("c8-crossing-dropped", "filter_top_k_top_p", "test_filter_top_k_top_p",
          [("before = probs.cumsum(dim=-1) - probs", "before = probs.cumsum(dim=-1)")],
          "keep the token that crosses top_p"),
        M("c8-logit-cumsum", "filter_top_k_top_p", "test_filter_top_k_top_p",
          [("probs = torch.softmax(ranked.masked_fill(~keep, -math.inf), dim=-1)",
            "probs = ranked.masked_fill(~keep, 0.0)")],
          "top-p adds up probabilities, not logits"),
        M("c8-whole-vocabulary", "filter_top_k_top_p", "test_filter_top_k_top_p",
          [("probs = torch.softmax(ranked.masked_fill(~keep, -math.inf), dim=-1)",
            "probs = torch.softmax(ranked, dim=-1)")],
          "top-p works on what top-k kept"),
        M("c8-ascending", "filter_top_k_top_p", "test_filter_top_k_top_p",
          [("descending=True", "descending=False")], "rank the tokens highest first"),
        M("c8-past-only", "attend_with_cache", "test_attend_with_cache",
          [("scores = q @ keys.transpose(1, 2)", "scores = q @ cache_k.transpose(1, 2)"),
           ("return weights @ values, keys, values", "return weights @ cache_v, keys, values")],
          "attend to the new token too"),
        M("c8-no-scale", "attend_with_cache", "test_attend_with_cache",
          [(" / math.sqrt(q.shape[-1])", "")], "the scores are not scaled"),
        M("c8-wrong-axis", "attend_with_cache", "test_attend_with_cache",
          [("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=1)")],
          "take the softmax over the last axis"),
        M("c8-new-first", "attend_with_cache", "test_attend_with_cache",
          [("torch.cat((cache_k, k), dim=1)", "torch.cat((k, cache_k), dim=1)"),
           ("torch.cat((cache_v, v), dim=1)", "torch.cat((v, cache_v), dim=1)")],
          "append the new key AFTER the cached ones"),
        M("c8-cache-replaced", "attend_with_cache", "test_attend_with_cache",
          [("keys = torch.cat((cache_k, k), dim=1)", "keys = k"),
           ("values = torch.cat((cache_v, v), dim=1)", "values = v")],
          "the cache grows by one position each step"),
    ],
}


def _nbgrader(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def solution_sources(instructor_nb) -> dict:
    """grade_id -> the instructor's answer, solution markers removed, for each code answer cell."""
    sources = {}
    for cell in instructor_nb.cells:
        meta = _nbgrader(cell)
        if cell.cell_type == "code" and meta.get("solution"):
            sources[meta["grade_id"]] = "\n".join(
                line for line in cell.source.split("\n")
                if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)
    return sources


def with_mistake(source: str, mistake: Mistake) -> str:
    """The instructor's answer rewritten to make ``mistake`` (each edit must match once)."""
    for old, new in mistake.edits:
        if source.count(old) != 1:
            raise ValueError(f"{mistake.name}: {old!r} occurs {source.count(old)} times")
        source = source.replace(old, new)
    return source


def submission(student_nb, instructor_nb, mistake=None):
    """The released notebook with every answer cell filled in from the instructor version,
    ``mistake`` (if any) made in its one cell; written answers are left as released."""
    import copy
    answers = solution_sources(instructor_nb)
    nb = copy.deepcopy(student_nb)
    for cell in nb.cells:
        grade_id = _nbgrader(cell).get("grade_id")
        if cell.cell_type == "code" and _nbgrader(cell).get("solution"):
            source = answers[grade_id]
            if mistake is not None and grade_id == mistake.solution:
                source = with_mistake(source, mistake)
            cell.source = source
    return nb
