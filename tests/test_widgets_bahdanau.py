"""Headless tests of the lesson-4 alignment explorer and the pure functions under it.

An untrained (seeded) model is enough here: the explorer's job is to show whatever the model
does, and to explain input it cannot translate. The trained model is tested in
test_training_bahdanau.py.
"""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from utils.data import EOS  # noqa: E402
from utils.seq2seq import BahdanauConfig, build_bahdanau
from utils.training import training_data
from utils.widgets.bahdanau import (AlignmentExplorer, alignment_view,  # noqa: E402
                                    strongest_alignment)

NUM_STEPS = 10


@pytest.fixture(scope="module")
def model_and_vocabs(course_pairs_file):
    config = BahdanauConfig()
    _, src_vocab, tgt_vocab = training_data(config, course_pairs_file)
    torch.manual_seed(0)
    return build_bahdanau(config, src_vocab, tgt_vocab).eval(), src_vocab, tgt_vocab


@pytest.fixture
def explorer(model_and_vocabs):
    return AlignmentExplorer(*model_and_vocabs, NUM_STEPS, sentence="i'm home .")


def _shown_rows_cols(explorer):
    grid = np.ma.getdata(explorer.image.get_array())
    finite = np.isfinite(grid)
    return int(finite.any(axis=1).sum()), int(finite.any(axis=0).sum())


# ----------------------------------------------------------------------------- pure functions

def test_strongest_alignment_picks_the_row_maximum():
    attention = torch.tensor([[0.1, 0.7, 0.2], [0.6, 0.3, 0.1]])
    pairs = strongest_alignment(attention, ["i'm", "home", EOS], ["chez", EOS])
    assert [(o, s) for o, s, _ in pairs] == [("chez", "home"), (EOS, "i'm")]
    assert pairs[0][2] == pytest.approx(0.7)
    with pytest.raises(ValueError, match="pass weights \\(output steps, source tokens\\)"):
        strongest_alignment(attention, ["a", "b"], ["x", "y"])


def test_alignment_view_notes(model_and_vocabs):
    model, src, tgt = model_and_vocabs
    ok = alignment_view(model, "I'm home.", src, tgt, NUM_STEPS)
    assert ok["error"] is None and ok["translation"].source_tokens == ["i'm", "home", ".", EOS]
    assert len(ok["alignment"]) == len(ok["translation"].output_tokens)
    unknown = alignment_view(model, "i'm home xyzzy .", src, tgt, NUM_STEPS)
    assert any("read as <unk>: 'xyzzy'" in note for note in unknown["notes"])
    long = alignment_view(model, "i'm home and i lost my little dog today too .", src, tgt,
                          NUM_STEPS)
    assert any("too long for num_steps=10" in note and "dropped: 'too .'" in note
               for note in long["notes"])
    for sentence, reason in [("", "the sentence is empty"), ("xyzzy plugh", "none of the words")]:
        view = alignment_view(model, sentence, src, tgt, NUM_STEPS)
        assert view["translation"] is None and reason in view["error"]


# ----------------------------------------------------------------------------- the explorer

def test_starts_on_the_given_sentence(explorer):
    translation = explorer.state["translation"]
    assert "i&#x27;m home . →" in explorer.readout.value
    rows = len(translation.output_tokens)
    assert explorer.controls["step"].max == rows - 1 == explorer.state["step"]
    assert _shown_rows_cols(explorer) == (rows, 4)
    assert explorer.view.value[:8] == b"\x89PNG\r\n\x1a\n"


def test_typing_a_sentence_updates_translation_heatmap_and_slider_in_place(explorer):
    image, box, png = explorer.image, explorer.row_box, explorer.view.value
    explorer.controls["sentence"].value = "i lost ."
    translation = explorer.state["translation"]
    assert translation.source_tokens == ["i", "lost", ".", EOS]
    assert "i lost . →" in explorer.readout.value
    assert explorer.controls["step"].max == len(translation.output_tokens) - 1
    assert explorer.image is image and explorer.row_box is box          # updated, not rebuilt
    assert _shown_rows_cols(explorer) == (len(translation.output_tokens), 4)
    assert [t.get_text() for t in explorer.src_labels[:4]] == ["i", "lost", ".", EOS]
    assert explorer.view.value != png


def test_step_slider_frames_the_row_and_draws_its_weights(explorer):
    weights = explorer.state["translation"].attention.numpy()
    for step in range(min(3, weights.shape[0])):
        explorer.controls["step"].value = step
        assert explorer.state["step"] == step
        assert explorer.row_box.get_y() == pytest.approx(step - 0.5)
        widths = [bar.get_width() for bar in explorer.bars[:weights.shape[1]]]
        np.testing.assert_allclose(widths, weights[step], rtol=1e-6)
        assert f"step {step}: " in explorer.readout.value
        best = int(weights[step].argmax())
        assert explorer.bar_labels[best].get_fontweight() == "bold"


def test_bad_input_shows_a_note_not_a_traceback(explorer):
    explorer.controls["sentence"].value = ""
    assert "note:" in explorer.readout.value and "the sentence is empty" in explorer.readout.value
    assert explorer.controls["step"].disabled
    assert _shown_rows_cols(explorer) == (0, 0)
    assert "nothing to show" in explorer.message.get_text()
    explorer.controls["sentence"].value = "xyzzy plugh"
    assert "none of the words" in explorer.readout.value
    explorer.controls["sentence"].value = "i'm home xyzzy ."                 # back to a translation
    assert not explorer.controls["step"].disabled
    assert "read as &lt;unk&gt;: &#x27;xyzzy&#x27;" in explorer.readout.value
    assert explorer.message.get_text() == ""


def test_html_in_the_sentence_is_escaped(explorer):
    explorer.controls["sentence"].value = "i'm home <b>x</b> ."
    assert "<b>x</b>" not in explorer.readout.value


def test_shorter_translation_clamps_the_step(explorer):
    explorer.controls["sentence"].value = "i'm home and i lost my little dog today ."
    explorer.controls["step"].value = explorer.controls["step"].max
    explorer.controls["sentence"].value = "go ."
    rows = len(explorer.state["translation"].output_tokens)
    assert explorer.controls["step"].value <= rows - 1 and explorer.state["step"] <= rows - 1
