"""Headless tests of the lesson-3 explorers and the pure functions under them."""

import math

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from utils.widgets.scoring_functions import (DIMENSIONS, MaskExplorer, ScaleExplorer,  # noqa: E402
                                             masked_weights, random_unit_vectors,
                                             saturation_stats, scoring_modules)


# ----------------------------------------------------------------------------- pure functions

def test_masked_weights_zero_past_each_length_and_rows_sum_to_one():
    scores = torch.randn(3, 4)
    state = masked_weights(scores, [1, 4, 2], causal=False)
    w = state["weights"]
    assert ((w > 0).sum(-1)).tolist() == [1, 4, 2]
    torch.testing.assert_close(w.sum(-1), torch.ones(3))
    torch.testing.assert_close(w[2, :2], torch.softmax(scores[2, :2], -1))
    assert state["entropy"][0].item() == 0.0


def test_causal_mask_caps_each_row_at_its_position():
    state = masked_weights(torch.randn(4, 4), [4, 1, 4, 2], causal=True)
    assert state["lengths"].tolist() == [1, 1, 3, 2]
    assert torch.triu(state["weights"], diagonal=1).abs().sum() == 0


def test_masked_weights_bad_input():
    with pytest.raises(ValueError, match=r"one length per query row \(3\)"):
        masked_weights(torch.randn(3, 4), [1, 2], causal=False)
    with pytest.raises(ValueError, match="at least as many keys as queries"):
        masked_weights(torch.randn(4, 3), [1, 1, 1, 1], causal=True)


def test_scoring_modules_are_seeded_and_leave_the_global_stream_alone():
    torch.manual_seed(5)
    expected_next = torch.rand(1)
    torch.manual_seed(5)
    a, b = scoring_modules(4, seed=3), scoring_modules(4, seed=3)
    assert torch.equal(torch.rand(1), expected_next)
    assert torch.equal(a["additive"].W_q.weight, b["additive"].W_q.weight)
    assert set(a) == {"additive", "dot", "scaled_dot", "bilinear"}
    assert not any(module.training for module in a.values())


def test_unscaled_scores_saturate_and_scaled_do_not():
    q, k = random_unit_vectors(256, 1024, seed=0), random_unit_vectors(10, 1024, seed=1)
    small = saturation_stats(q[:, :4], k[:, :4], scaled=False)
    big = saturation_stats(q, k, scaled=False)
    big_scaled = saturation_stats(q, k, scaled=True)
    # Score spread grows like sqrt(d) without scaling (32 at d=1024), stays near 1 with it.
    assert 25 < big["score_std"] < 40 and 0.8 < big_scaled["score_std"] < 1.2
    assert big["entropy"] < 0.3 < 1.5 < big_scaled["entropy"] < math.log(10)
    assert big["max_weight"] > 0.9 and big["jacobian_norm"] < small["jacobian_norm"] / 4
    torch.testing.assert_close(big["weights"].sum(-1), torch.ones(256))
    # Saturated: fewer than 2 of 10 keys keep a weight >= 1e-3; scaled, all of them do.
    assert big["live_keys"] < 2 and big_scaled["live_keys"] == 10
    # The *mean* gradient reaching the query grows without scaling (the √d the scale would remove
    # multiplies it), but a few near-tie queries carry it: the median query gets almost nothing,
    # and more than half the queries get less than 1e-3 (what the lesson says in section 4).
    assert big["query_gradient"] > small["query_gradient"] > big_scaled["query_gradient"]
    assert big["median_query_gradient"] < 1e-3 < 0.3 < big_scaled["median_query_gradient"]
    assert big["small_gradient_queries"] > 128 and big_scaled["small_gradient_queries"] == 0
    assert big_scaled["query_gradients"].min() > 0.2


def test_saturation_stats_per_query_norms_agree_with_the_summaries():
    q, k = random_unit_vectors(7, 64, seed=2), random_unit_vectors(10, 64, seed=3)
    stats = saturation_stats(q, k, scaled=False)
    assert stats["query_gradients"].shape == (7,) and stats["jacobian_norms"].shape == (7,)
    assert stats["query_gradient"] == pytest.approx(stats["query_gradients"].mean().item())
    assert stats["jacobian_norm"] == pytest.approx(stats["jacobian_norms"].mean().item())
    assert stats["median_query_gradient"] == stats["query_gradients"].sort().values[3].item()
    assert stats["small_gradient_queries"] == int((stats["query_gradients"] < 1e-3).sum())


def test_saturation_stats_gradients_match_autograd():
    q, k = random_unit_vectors(3, 8, seed=4), random_unit_vectors(5, 8, seed=5)
    for scaled in (False, True):
        stats = saturation_stats(q, k, scaled)
        scale = math.sqrt(8) if scaled else 1.0
        by_query, by_scores = [], []
        for row in q:
            by_query.append(torch.autograd.functional.jacobian(
                lambda x: torch.softmax(k @ x / scale, -1), row).norm())
            by_scores.append(torch.autograd.functional.jacobian(
                lambda s: torch.softmax(s, -1), k @ row / scale).norm())
        expected_query, expected_scores = torch.stack(by_query), torch.stack(by_scores)
        assert stats["query_gradient"] == pytest.approx(expected_query.mean().item(), rel=1e-5)
        assert stats["jacobian_norm"] == pytest.approx(expected_scores.mean().item(), rel=1e-5)
        torch.testing.assert_close(stats["query_gradients"], expected_query, rtol=1e-5, atol=0)
        torch.testing.assert_close(stats["jacobian_norms"], expected_scores, rtol=1e-5, atol=0)
    weights = stats["weights"]
    assert stats["live_keys"] == pytest.approx((weights >= 1e-3).sum(-1).float().mean().item())


def test_saturation_stats_rejects_mismatched_sizes():
    with pytest.raises(ValueError, match=r"queries \(m, d\) and keys \(n, d\) of one size d"):
        saturation_stats(torch.randn(3, 4), torch.randn(5, 2), scaled=True)


# ----------------------------------------------------------------------------- mask explorer

@pytest.fixture
def mask_explorer():
    return MaskExplorer()


def test_mask_explorer_starts_unmasked(mask_explorer):
    w = mask_explorer.state["weights"]
    assert w.shape == (5, 5) and (w > 0).all()
    assert "scaled dot product · valid lengths: [5, 5, 5, 5, 5]" in mask_explorer.readout.value


def test_length_slider_masks_its_row_in_place(mask_explorer):
    image, labels = mask_explorer.heatmap, mask_explorer.labels
    mask_explorer.controls["length_2"].value = 2
    state = mask_explorer.state
    assert mask_explorer.heatmap is image and mask_explorer.labels is labels
    shown = np.asarray(mask_explorer.heatmap.get_array())
    np.testing.assert_allclose(shown[2, 2:], 0)
    np.testing.assert_allclose(shown[2, :2].sum(), 1, rtol=1e-6)
    assert labels[2][3].get_text() == "×" and labels[2][0].get_text() == f"{shown[2, 0]:.2f}"
    assert "valid lengths: [5, 5, 2, 5, 5]" in mask_explorer.readout.value
    assert state["lengths"].tolist() == [5, 5, 2, 5, 5]


def test_length_one_gives_zero_entropy_in_the_readout(mask_explorer):
    mask_explorer.controls["length_0"].value = 1
    assert "entropy per row (nats): [0.00," in mask_explorer.readout.value


def test_causal_toggle_makes_the_heatmap_lower_triangular(mask_explorer):
    mask_explorer.controls["causal"].value = True
    shown = np.asarray(mask_explorer.heatmap.get_array())
    assert np.triu(shown, 1).sum() == 0
    assert "valid lengths (causal): [1, 2, 3, 4, 5]" in mask_explorer.readout.value
    mask_explorer.controls["length_4"].value = 2           # a slider shorter than the causal cap wins
    assert mask_explorer.state["lengths"].tolist() == [1, 2, 3, 4, 2]


def test_scoring_menu_switches_the_scores(mask_explorer):
    before = mask_explorer.state["weights"].clone()
    for name, label in [("additive", "additive"), ("dot", "dot product"), ("bilinear", "bilinear")]:
        mask_explorer.controls["scoring"].value = name
        assert mask_explorer.readout.value.startswith(label + " ·")
        expected = torch.softmax(mask_explorer.scores[name], -1)
        torch.testing.assert_close(mask_explorer.state["weights"], expected)
        assert not torch.allclose(mask_explorer.state["weights"], before)
    # Unscaled dot product of size-4 tokens: scores twice the scaled ones.
    torch.testing.assert_close(mask_explorer.scores["dot"], 2 * mask_explorer.scores["scaled_dot"])


def test_mask_explorer_rejects_bad_sizes():
    with pytest.raises(ValueError, match="num_tokens and size must be >= 1"):
        MaskExplorer(num_tokens=0)


# ----------------------------------------------------------------------------- scale explorer

@pytest.fixture
def scale_explorer():
    return ScaleExplorer()


def test_scale_explorer_saturates_without_scaling(scale_explorer):
    bars, marker = list(scale_explorer.bars), scale_explorer.marker
    scale_explorer.controls["d"].value = 1024
    scaled_entropy = scale_explorer.state["entropy"]
    scale_explorer.controls["scaled"].value = False
    state = scale_explorer.state
    assert state["entropy"] < 0.3 < 1.5 < scaled_entropy
    assert list(scale_explorer.bars) == bars and scale_explorer.marker is marker
    heights = [b.get_height() for b in scale_explorer.bars]
    np.testing.assert_allclose(heights, state["weights"][0].numpy(), rtol=1e-6)
    assert max(heights) > 0.9
    np.testing.assert_allclose(marker.get_data(), [[1024], [state["entropy"]]])
    readout = scale_explorer.readout.value
    assert readout.startswith("d = 1024, scores q·k ")
    live = f"mean live keys (weight ≥ 0.001) {state['live_keys']:.1f} of 10"
    assert live in readout and "mean entropy" in readout
    assert f"‖∂α/∂q‖ mean {state['query_gradient']:.3f}, median " in readout
    assert f"below 0.001 for {state['small_gradient_queries']} of 256" in readout


def test_scale_explorer_readout_gives_query_0_beside_the_means(scale_explorer):
    # The bars show query 0: the readout gives its own numbers, not only the means. At d=256
    # unscaled query 0 is one-hot and gets almost no gradient, while the mean is above 1.
    scale_explorer.controls["scaled"].value = False
    scale_explorer.controls["d"].value = 256
    state, readout = scale_explorer.state, scale_explorer.readout.value
    query_0 = readout.split("<br>")[0]
    assert "query 0" in query_0 and "largest weight 1.00" in query_0
    assert "live keys 1 of 10" in query_0
    assert f"‖∂α/∂q‖ {state['query_gradients'][0].item():.3f}" in query_0
    assert state["query_gradients"][0] < 0.01 < 1 < state["query_gradient"]
    assert "all 256 queries" in readout.split("<br>")[1]


def test_scale_explorer_draws_the_lessons_line_styles(scale_explorer):
    # Lesson 3's figure: unscaled q·k solid (first default colour), scaled q·k/√d dashed magenta.
    from matplotlib.colors import to_hex
    lines = {line.get_label(): line for line in scale_explorer.ax_curve.get_lines()}
    unscaled, scaled = lines["q·k"], lines["q·k/√d"]
    assert unscaled.get_linestyle() == "-" and to_hex(unscaled.get_color()) == to_hex("C0")
    assert scaled.get_linestyle() == "--" and to_hex(scaled.get_color()) == to_hex("m")


def test_scale_explorer_curves_match_the_pure_function(scale_explorer):
    assert len(scale_explorer.curves[True]) == len(DIMENSIONS)
    q, k = scale_explorer.queries, scale_explorer.keys
    expected = saturation_stats(q[:, :64], k[:, :64], scaled=False)["entropy"]
    assert scale_explorer.curves[False][DIMENSIONS.index(64)] == pytest.approx(expected)
