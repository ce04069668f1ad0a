"""Headless tests of the lesson-7 explorers and the pure functions under them."""

import html

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from utils.data import Vocab  # noqa: E402
from utils.transformer import (Transformer, TransformerConfig, attention_maps,  # noqa: E402
                               causal_demo_runs)
from utils.widgets.transformer import (CausalMaskExplorer, TransformerAttentionExplorer,  # noqa: E402
                                       pick_heatmap, reference_note)

SENTENCES = ("go .", "i lost .", "he's calm .")


@pytest.fixture(scope="module")
def toy():
    src = Vocab([["go", ".", "i", "lost", "he's", "calm"]] * 2)
    tgt = Vocab([["va", "!", "j'ai", "perdu", ".", "il", "est", "calme"]] * 2)
    torch.manual_seed(0)
    model = Transformer(len(src), len(tgt), 16, 32, 4, 2, 0.0).eval()
    return model, src, tgt


@pytest.fixture
def explorer(toy):
    model, src, tgt = toy
    return TransformerAttentionExplorer(model, src, tgt, num_steps=8, sentences=SENTENCES)


# ----------------------------------------------------------------------------- pure functions

def test_pick_heatmap_places_weights_top_left_and_labels_axes(toy):
    model, src, tgt = toy
    maps = attention_maps(model, "he's calm .", src, tgt, 8)
    T = len(maps.output_tokens)
    cross = pick_heatmap(maps, "cross", layer=2, head=3, size=8)
    np.testing.assert_array_equal(cross["matrix"], maps.cross[1, 2].numpy())
    assert cross["picture"].shape == (8, 8)
    assert np.isnan(cross["picture"][T:]).all() and not np.isnan(cross["picture"][:T]).any()
    assert cross["cols"] == maps.source_tokens and cross["rows"][0].startswith("<bos> → ")
    encoder = pick_heatmap(maps, "encoder", 1, 1, 8)
    assert encoder["rows"] == encoder["cols"] == maps.source_tokens
    decoder = pick_heatmap(maps, "decoder_self", 1, 1, 8)
    assert decoder["cols"] == maps.decoder_inputs and decoder["matrix"].shape == (T, T)
    with pytest.raises(ValueError, match=r"layer must lie in 1\.\.2 and head in 1\.\.4"):
        pick_heatmap(maps, "cross", 3, 1, 8)
    with pytest.raises(ValueError, match="kind must be one of"):
        pick_heatmap(maps, "sideways", 1, 1, 8)


def test_reference_note_says_whether_the_translation_is_the_reference():
    assert reference_note("il est calme .", None) == ""
    assert reference_note("il est calme .", "il est calme .") == \
        " (the reference <i>il est calme .</i>)"
    assert reference_note("il est bon .", "il est calme .") == \
        " (differs from the reference <i>il est calme .</i>)"
    assert "&lt;b&gt;" in reference_note("", "<b>")                  # escaped


# ----------------------------------------------------------------------------- attention explorer

def test_explorer_starts_on_cross_attention(explorer):
    state = explorer.state
    assert (state["kind"], state["layer"], state["head"]) == ("cross", 1, 1)
    assert "he's calm . &lt;eos&gt; →" in explorer.readout.value.replace("&#x27;", "'")
    assert explorer.view.value[:4] == b"\x89PNG"


def test_head_and_layer_change_the_heatmap_in_place(explorer):
    image, png = explorer.image, explorer.view.value
    before = explorer.state["matrix"].copy()
    explorer.controls["head"].value = 2
    after_head = explorer.state["matrix"]
    assert not np.allclose(before, after_head)
    assert explorer.image is image                              # same artist, new data
    np.testing.assert_array_equal(np.ma.filled(image.get_array(), np.nan)[:after_head.shape[0],
                                  :after_head.shape[1]], after_head)
    assert explorer.view.value != png
    explorer.controls["layer"].value = 2
    assert not np.allclose(after_head, explorer.state["matrix"])
    assert "layer 2, head 2" in explorer.readout.value


def test_kind_changes_the_shape_and_the_labels(explorer):
    explorer.controls["kind"].value = "decoder_self"
    T = len(explorer.state["maps"].output_tokens)
    assert explorer.state["matrix"].shape == (T, T)
    assert [t.get_text() for t in explorer.ax.get_xticklabels()][:T] == \
        explorer.state["maps"].decoder_inputs
    explorer.controls["kind"].value = "encoder"
    assert explorer.state["matrix"].shape == (8, 8)
    assert explorer.state["matrix"][:, 4:].sum() == 0          # keys past the valid length



def _pixels(png: bytes) -> np.ndarray:
    import io
    from PIL import Image
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def test_menu_labels_drawn_when_built_give_the_uncached_picture(toy):
    """The tick labels of every (menu sentence, kind) are drawn when the explorer is built: a
    first visit pastes them, and the picture and readout are those drawn without any cache."""
    from utils.widgets.base import GlyphCachingCanvas
    model, src, tgt = toy
    explorer = TransformerAttentionExplorer(model, src, tgt, num_steps=8, sentences=SENTENCES)
    labels = {(tuple(state["rows"]), tuple(state["cols"])) for state in
              (explorer.compute(s, k, 1, 1) for s in SENTENCES
               for k in ("encoder", "decoder_self", "cross"))}
    assert {key[-1] for key in explorer._layers} == labels     # (sprites, labels)
    steps = (("kind", "encoder"), ("sentence", "go ."), ("head", 2), ("kind", "decoder_self"),
             ("sentence", "i lost ."), ("kind", "cross"), ("sentence", "lost go ."))
    shown = []
    for name, value in steps:
        explorer.controls[name].value = value
        shown.append((explorer.view.value, explorer.readout.value))
    fresh = TransformerAttentionExplorer(model, src, tgt, num_steps=8, sentences=())
    for (name, value), (png, readout) in zip(steps, shown):
        fresh.controls[name].value = value
        GlyphCachingCanvas(fresh.fig)                          # no glyphs kept
        fresh._background = None                               # no background, layers, frames
        assert np.array_equal(_pixels(png), _pixels(fresh.render_png())), (name, value)
        assert readout == fresh.readout.value

def test_readout_shows_the_reference_of_a_known_sentence(toy):
    model, src, tgt = toy
    explorer = TransformerAttentionExplorer(model, src, tgt, num_steps=8, sentences=SENTENCES,
                                            references={"he's calm .": "il est calme .",
                                                        "i lost .": "<b>"})
    text = explorer.state["maps"].translation.text
    expected = reference_note(text, "il est calme .")
    assert expected and expected in explorer.readout.value
    explorer.controls["sentence"].value = "i lost ."
    assert "differs from the reference <i>&lt;b&gt;</i>" in explorer.readout.value
    explorer.controls["sentence"].value = "go ."                       # no reference known
    assert "reference" not in explorer.readout.value
    default = TransformerAttentionExplorer(model, src, tgt, num_steps=8, sentences=SENTENCES)
    assert default.references["he's calm ."] == "il est calme ."      # the four test pairs


def test_sentence_box_retranslates_and_reports_bad_input(explorer):
    explorer.controls["sentence"].value = "i lost ."
    assert explorer.state["maps"].source_tokens[:3] == ["i", "lost", "."]
    assert [t.get_text() for t in explorer.ax.get_yticklabels()][0].startswith("<bos> → ")
    explorer.controls["sentence"].value = ""
    assert explorer.state["error"].startswith("the sentence is empty")
    assert "the sentence is empty" in explorer.readout.value
    assert all(label.get_text() == "" for label in explorer.ax.get_yticklabels())
    assert np.ma.getmaskarray(explorer.image.get_array()).all() or \
        np.isnan(np.ma.filled(explorer.image.get_array(), np.nan)).all()
    explorer.controls["sentence"].value = "go go go go go go go go go go ."
    assert "note: only the first 7 words fit (num_steps=8)" in explorer.readout.value
    explorer.controls["sentence"].value = "i lost ."                    # recovers
    assert explorer.state["error"] is None


# ----------------------------------------------------------------------------- causal-mask demo

@pytest.fixture(scope="module")
def demo_runs(course_pairs_file):
    config = TransformerConfig(num_examples=200, num_epochs=8)
    return causal_demo_runs(config, path=course_pairs_file, use_cache=False)


def test_demo_runs_differ_where_the_lesson_says(demo_runs):
    on, off = demo_runs[True], demo_runs[False]
    assert on["future_share"] == 0.0 and off["future_share"] > 0.05
    assert len(on["losses"]) == len(off["losses"]) == 8
    assert off["final_loss"] < on["final_loss"]                 # the unmasked model peeks
    assert on["attention"].shape == (5, 5) and on["inputs"][0] == "<bos>"


def test_causal_checkbox_switches_runs_in_place(demo_runs):
    explorer = CausalMaskExplorer(demo_runs)
    assert "causal mask ON" in explorer.readout.value
    image, png = explorer.image, explorer.view.value
    explorer.controls["causal"].value = False
    assert "causal mask OFF" in explorer.readout.value
    assert explorer.image is image and explorer.view.value != png
    np.testing.assert_allclose(image.get_array(), demo_runs[False]["attention"])
    assert explorer.curves[False].get_linewidth() > explorer.curves[True].get_linewidth()
    english, french = demo_runs[False]["pairs"][0]
    text = demo_runs[False]["translations"][0]
    shown = html.escape(text) if text else "(nothing: &lt;eos&gt; first)"
    assert f"{html.escape(english)} → {shown}{reference_note(text, french)}" in \
        explorer.readout.value
    # The saved notebook's text describes both runs, the one shown first.
    snapshot = explorer.snapshot_text()
    assert snapshot.index("causal mask OFF") < snapshot.index("the other run: causal mask ON")
    explorer.controls["causal"].value = True
    snapshot = explorer.snapshot_text()
    assert snapshot.index("causal mask ON") < snapshot.index("the other run: causal mask OFF")
    assert f"final training loss {demo_runs[False]['final_loss']:.3f}" in snapshot
    with pytest.raises(ValueError, match="runs must map True"):
        CausalMaskExplorer({True: demo_runs[True]})
