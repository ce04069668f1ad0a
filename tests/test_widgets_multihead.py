"""Headless tests of the lesson-5 heads explorer and the pure functions under it."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from traitlets import TraitError  # noqa: E402
import torch  # noqa: E402

from utils.widgets.multihead import (HeadsExplorer, favourite_keys, head_offsets,  # noqa: E402
                                     head_weights, offset_multihead, position_tokens)


def test_head_offsets_cycle_previous_same_next():
    assert head_offsets(1) == [-1]
    assert head_offsets(6) == [-1, 0, 1, -2, 2, -3]


def test_position_tokens_shape_and_bad_input():
    X = position_tokens(8, 12)
    assert X.shape == (8, 12)
    torch.testing.assert_close(X[0], torch.tensor([1.0, 0.0] * 6))
    with pytest.raises(ValueError, match="even num_hiddens"):
        position_tokens(8, 7)


@pytest.mark.parametrize("heads", [1, 2, 3, 4, 6])
def test_built_heads_look_where_they_were_built_to(heads):
    weights = head_weights(heads, valid_len=8)                   # (h, 8, 8)
    assert weights.shape == (heads, 8, 8)
    for head, offset in enumerate(head_offsets(heads)):
        for t in range(8):
            target = min(max(t + offset, 0), 7)                   # off the ends: nearest key
            assert weights[head, t].argmax().item() == target, (heads, head, t)
            if 0 <= t + offset <= 7:
                assert weights[head, t, target] > 0.9


def test_heads_differ_from_each_other():
    weights = head_weights(3, valid_len=8)
    assert (weights[0] - weights[1]).abs().max() > 0.9
    assert (weights[1] - weights[2]).abs().max() > 0.9


def test_size_one_heads_differ_but_each_picks_only_an_end():
    weights = head_weights(12, valid_len=8)                       # (12, 8, 8), head size 1
    for i in range(12):                                           # each head keeps its offset
        for j in range(i):
            assert (weights[i] - weights[j]).abs().max() > 0.1, (i, j)
    for head, offset in enumerate(head_offsets(12)):
        for t in range(8):
            # q_t ∝ cos(π (t + o) / 8), k_s = cos(π s / 8) falls from key 0 to key 7
            q = np.cos(np.pi * (t + offset) / 8)
            pick = favourite_keys(weights, t, valid_len=8)[head]
            if abs(q) < 1e-6:                                     # t + o = ±4: q = 0
                assert pick is None
                torch.testing.assert_close(weights[head, t], torch.full((8,), 1 / 8))
            else:
                assert pick == (0 if q > 0 else 7), (head, t)


def test_size_one_heads_with_masked_keys_pick_first_or_last_valid_key():
    weights = head_weights(12, valid_len=5)
    picks = {favourite_keys(weights, t, valid_len=5)[head] for head in range(12) for t in range(8)}
    assert picks == {0, 4, None}


def test_favourite_keys_ignores_masked_keys_and_flat_rows():
    weights = torch.zeros(2, 3, 4)
    weights[0, 1, :3] = 1 / 3                                     # uniform over 3 valid keys
    weights[1, 1] = torch.tensor([0.1, 0.7, 0.2, 0.0])
    assert favourite_keys(weights, 1, valid_len=3) == [None, 1]


def test_valid_length_masks_keys():
    weights = head_weights(4, valid_len=5)
    assert weights[..., 5:].abs().sum() == 0
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, 8))
    with pytest.raises(ValueError, match=r"valid_len must lie in 1\.\.8, got 9"):
        head_weights(4, valid_len=9)


def test_offset_multihead_rejects_non_divisor():
    with pytest.raises(ValueError, match=r"choose one of its divisors: \[1, 2, 3, 4, 6, 12\]"):
        offset_multihead(5)


@pytest.fixture
def explorer():
    return HeadsExplorer()


def test_heads_slider_offers_only_divisors(explorer):
    slider = explorer.controls["heads"]
    assert tuple(slider.options) == (1, 2, 3, 4, 6, 12)
    with pytest.raises(TraitError, match="Invalid selection"):
        slider.value = 5                                           # not an option: refused


def test_heads_slider_changes_panels_readout_and_picture(explorer):
    assert "heads: 3" in explorer.readout.value
    before_png, before_image = explorer.view.value, explorer.image
    explorer.controls["heads"].value = 4
    assert explorer.state["weights"].shape == (4, 8, 8)
    assert "heads: 4" in explorer.readout.value and "head size: 3" in explorer.readout.value
    assert explorer.image is before_image                          # updated in place
    assert explorer.view.value != before_png
    titles = [t.get_text() for t in explorer.titles]
    assert sum(bool(t) for t in titles) == 4 and titles[3] == "head 4 (aim t-2)"
    picture = explorer.image.get_array()
    assert np.isfinite(np.asarray(picture, dtype=float)).sum() == 4 * 64   # four 8x8 panels
    explorer.controls["heads"].value = 12
    assert sum(bool(t.get_text()) for t in explorer.titles) == 12
    assert "size-1 heads can only pick the first or last key (of the valid keys)" in explorer.readout.value
    # query 4 of head 2 (aim t): q = 0, a uniform row, reported as no favourite
    assert explorer.state["looks_at"] == [0, None, 7, 0, 7, 0, 7, 0, 7, 0, 7, 0]
    assert "[0, –, 7, 0, 7" in explorer.readout.value
    assert "(–: a uniform row, no favourite key)" in explorer.readout.value


def test_valid_length_slider_greys_masked_keys(explorer):
    explorer.controls["valid_len"].value = 5
    assert "valid length: 5" in explorer.readout.value
    assert explorer.state["weights"][..., 5:].abs().sum() == 0
    picture = np.asarray(explorer.image.get_array(), dtype=float)
    assert (picture == -1.0).sum() == 3 * 8 * 3                   # 3 heads x 8 rows x 3 keys
    # query 4 (the middle) looks at keys 3, 4 and the clipped 4 (key 5 is masked)
    assert explorer.state["looks_at"] == [3, 4, 4]
