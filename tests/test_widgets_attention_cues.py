"""Headless tests of the lesson-1 explorer: set slider values, check what the student would see."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from utils.widgets.attention_cues import AttentionCuesExplorer  # noqa: E402


@pytest.fixture
def explorer():
    return AttentionCuesExplorer()


def _weights(explorer):
    return explorer.state["weights"].numpy()


def test_starts_on_key_two(explorer):
    np.testing.assert_allclose(_weights(explorer), [0, 1, 0, 0], atol=1e-6)
    assert "weights: [0.00, 1.00, 0.00, 0.00]" in explorer.readout.value
    assert "output: [10.00, 0.00]" in explorer.readout.value


def test_moving_query_sliders_moves_the_weights_to_the_tied_keys(explorer):
    explorer.controls["q2"].value = 0.0
    explorer.controls["q3"].value = 10.0
    np.testing.assert_allclose(_weights(explorer), [0, 0, 0.5, 0.5], atol=1e-6)
    np.testing.assert_allclose(explorer.state["output"].numpy(), [550, 5.5], rtol=1e-6)
    assert "output: [550.00, 5.50]" in explorer.readout.value


def test_artists_are_updated_in_place(explorer):
    bars, image = list(explorer.bars), explorer.image
    explorer.controls["q1"].value = 10.0           # query [10, 10, 0]: halfway between keys 1, 2
    assert list(explorer.bars) == bars and explorer.image is image
    np.testing.assert_allclose([b.get_height() for b in explorer.bars], [0.5, 0.5, 0, 0], atol=1e-6)
    np.testing.assert_allclose(np.asarray(explorer.image.get_array())[0], [0.5, 0.5, 0, 0],
                               atol=1e-6)


def test_higher_temperature_flattens_lower_sharpens(explorer):
    explorer.controls["q1"].value = 1.0
    explorer.controls["q2"].value = 1.5
    middle = _weights(explorer).max()
    explorer.controls["temperature"].value = 10.0
    flat = _weights(explorer)
    explorer.controls["temperature"].value = 0.1
    sharp = _weights(explorer)
    assert flat.max() < middle < sharp.max()
    assert sharp.argmax() == 1 and sharp.max() > 0.99
    np.testing.assert_allclose(flat.sum(), 1.0, rtol=1e-6)


def test_zero_query_gives_uniform_weights(explorer):
    explorer.controls["q2"].value = 0.0
    np.testing.assert_allclose(_weights(explorer), [0.25] * 4, atol=1e-6)


def test_rejects_keys_that_do_not_match_three_sliders():
    with pytest.raises(ValueError, match=r"keys must have shape \(n, 3\)"):
        AttentionCuesExplorer(keys=[[1.0, 0.0]], values=[[1.0]])


def test_labels_count_from_one_like_the_lesson(explorer):
    # Lesson 1 numbers keys k_1..k_4 and the query's entries 1..3; every label shown agrees.
    assert [explorer.controls[f"q{i}"].description for i in (1, 2, 3)] == [
        "query entry 1", "query entry 2", "query entry 3"]
    assert [t.get_text() for t in explorer.ax_bar.get_xticklabels()] == [
        "key 1", "key 2", "key 3", "key 4"]
    assert [t.get_text() for t in explorer.ax_map.get_xticklabels()] == ["1", "2", "3", "4"]
