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
from utils.gold_alignment import parse_gold  # noqa: E402
from utils.seq2seq import BahdanauConfig, build_bahdanau  # noqa: E402
from utils.training import training_data  # noqa: E402
from utils.widgets.bahdanau import (AlignmentExplorer, alignment_view,  # noqa: E402
                                    reference_view, strongest_alignment)

# A gold pair of our own (the explorer takes any gold set): sure links 1-1 2-2 3-3 4-4 5-5,
# "i'm" - "suis" possible.
GOLD = parse_gold("""
id: 7
tags: monotone
en: i'm home .
fr: je suis chez moi .
sure: 1-1 2-3 2-4 3-5
possible: 1-2
""")
REFERENCES = [("i lost .", "j'ai perdu ."), ("go .", "va !"), ("go .", "bouge !")]

NUM_STEPS = 10


@pytest.fixture(scope="module")
def model_and_vocabs(course_pairs_file):
    config = BahdanauConfig()
    _, src_vocab, tgt_vocab = training_data(config, course_pairs_file)
    torch.manual_seed(0)
    return build_bahdanau(config, src_vocab, tgt_vocab).eval(), src_vocab, tgt_vocab


@pytest.fixture
def explorer(model_and_vocabs):
    return AlignmentExplorer(*model_and_vocabs, NUM_STEPS, sentence="i'm home .",
                             references=REFERENCES, trained_on=[("i lost .", "j'ai perdu .")],
                             gold=GOLD)


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


# ----------------------------------------------------------------------------- references and gold

def _squares(collection):
    """(english, french) cells of the squares in a PatchCollection of unit cells."""
    return {(int(round(path.vertices[:, 0].min() + 0.5)), int(round(path.vertices[:, 1].min()
                                                                     + 0.5)))
            for path in collection.get_paths()}


def test_reference_view_prefers_the_gold_french_and_checks_the_translation(model_and_vocabs):
    model, src, tgt = model_and_vocabs
    view = alignment_view(model, "go .", src, tgt, NUM_STEPS)
    refs = {"go .": ["va !", "bouge !"]}
    info = reference_view("Go.", view["translation"], refs, {}, {"go ."}, NUM_STEPS)
    assert info["references"] == ["va !", "bouge !"] and info["teacher"] == "va !"
    assert info["seen"] is True and info["gold"] is None
    assert info["matches"] is (view["translation"].text in ("va !", "bouge !"))
    gold = {"i'm home .": GOLD[0]}
    info = reference_view("i'm home .", None, {"i'm home .": ["je suis à la maison ."]}, gold,
                          None, NUM_STEPS)
    assert info["references"] == ["je suis chez moi .", "je suis à la maison ."]
    assert info["gold"] is GOLD[0] and info["matches"] is None and info["seen"] is None
    assert reference_view("xyzzy", None, refs, gold, set(), NUM_STEPS)["references"] == []
    long = {"go .": ["un deux trois quatre cinq six sept huit neuf dix ."]}
    assert reference_view("go .", None, long, {}, None, NUM_STEPS)["teacher"] is None


def test_the_readout_shows_references_and_flags_the_translation(explorer):
    explorer.controls["sentence"].value = "go ."
    text = explorer.readout.value
    assert "reference (data file; never seen in training): va ! | bouge !" in text
    matches = explorer.state["translation"].text in ("va !", "bouge !")
    assert ("✓ matches a reference" if matches else "✗ differs from every reference") in text
    explorer.controls["sentence"].value = "i lost ."
    assert "(data file; a training sentence)" in explorer.readout.value
    explorer.controls["sentence"].value = "i lost my dog ."
    assert "no reference" in explorer.readout.value
    assert explorer.controls["map_of"].disabled
    assert explorer.controls["map_of"].value == "translation"


def test_gold_links_are_marked_on_the_map_of_the_reference(explorer):
    # the untrained model does not write the reference: no marks on its own translation
    assert explorer.state["translation"].text != "je suis chez moi ."
    assert "gold pair 7, hand-aligned" in explorer.readout.value
    assert not explorer.controls["map_of"].disabled
    assert _squares(explorer.sure_marks) == set() == _squares(explorer.possible_marks)
    png = explorer.view.value
    explorer.controls["map_of"].value = "reference"
    shown = explorer.state["map"]
    assert shown["kind"] == "reference" and shown["rows"] == ["je", "suis", "chez", "moi", ".",
                                                              EOS]
    assert shown["weights"].shape == (6, 4)
    assert _shown_rows_cols(explorer) == (6, 4)
    assert [t.get_text() for t in explorer.out_labels[:6]] == shown["rows"]
    assert _squares(explorer.sure_marks) == set(GOLD[0].sure)
    assert _squares(explorer.possible_marks) == {(0, 1)}               # i'm - suis, dashed
    assert explorer.possible_marks.get_linestyle() != explorer.sure_marks.get_linestyle()
    assert "gold links drawn" in explorer.readout.value
    assert explorer.view.value != png
    # the slider follows the reference's rows; the readout checks the chosen word's link
    assert explorer.controls["step"].max == 5
    explorer.controls["step"].value = 2                                  # "chez": gold "home"
    best = max(range(2), key=lambda j: shown["weights"][2, j].item())    # over i'm, home
    verdict = "✓ a gold link" if best == 1 else "✗ not a gold link"
    assert "step 2: strongest English word" in explorer.readout.value
    assert verdict in explorer.readout.value and "(gold: &#x27;home&#x27;)" in \
        explorer.readout.value
    # punctuation rows are not scored (as in score_maps): no verdict on the "." row
    explorer.controls["step"].value = 4                                  # "."
    assert "punctuation: not scored" in explorer.readout.value
    assert "✓ a gold link" not in explorer.readout.value
    assert "✗ not a gold link" not in explorer.readout.value
    # a sentence without a reference: back to the translation, no marks
    explorer.controls["sentence"].value = "i lost my dog ."
    assert explorer.state["map_of"] == "translation"
    assert _squares(explorer.sure_marks) == set()


def test_gold_links_are_marked_on_a_translation_that_is_the_reference(model_and_vocabs):
    model, src, tgt = model_and_vocabs
    probe = AlignmentExplorer(model, src, tgt, NUM_STEPS, sentence="go .", gold=())
    written = probe.state["translation"].tokens            # whatever the untrained model writes
    assert written, "the seeded untrained model should write at least one token"
    pair = parse_gold(f"""
id: 9
tags: monotone
en: go .
fr: {' '.join(written)}
sure: 1-1
""")[0]
    explorer = AlignmentExplorer(model, src, tgt, NUM_STEPS, sentence="go .", gold=[pair])
    assert explorer.state["map"]["kind"] == "translation"
    assert explorer.state["map"]["gold"] is pair
    assert _squares(explorer.sure_marks) == {(0, 0)}
    assert "✓ matches a reference" in explorer.readout.value
