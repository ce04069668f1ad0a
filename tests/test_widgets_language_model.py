"""Headless tests of lesson 8's explorers (sampling, induction) and utils.next_token under them."""

import matplotlib

matplotlib.use("Agg")

import math  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from utils.data import Vocab  # noqa: E402
from utils.induction import (InductionCheckpoint, InductionRun, LESSON_INDUCTION,  # noqa: E402
                             train_or_load_induction)
from utils.language_model import DecoderOnlyConfig, DecoderOnlyLM, filter_logits  # noqa: E402
from utils.next_token import ContinuationCache, next_token_table, next_token_view  # noqa: E402
from utils.widgets.induction import InductionExplorer, checkpoint_summary  # noqa: E402
from utils.lm_training import continue_prompt  # noqa: E402
from utils.widgets.sampling import REMOVED, TOP, SamplingExplorer  # noqa: E402

SENTENCES = [s.split() for s in ["i am here .", "i am not sure .", "you are here .",
                                 "we are ready .", "he is tired .", "she is not here ."]]


@pytest.fixture
def tiny():
    vocab = Vocab(SENTENCES, min_freq=1)
    torch.manual_seed(0)
    model = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=len(vocab), num_hiddens=16, num_heads=2,
                                            num_blks=2, ffn_num_hiddens=16, max_len=8)).eval()
    return model, vocab


def test_next_token_view_shapes_and_rows_sum_to_one(tiny):
    model, vocab = tiny
    view = next_token_view(model, vocab, "i am zzz")
    assert view.tokens == ["<bos>", "i", "am", "<unk>"]
    assert view.logits.shape == (len(vocab),)
    assert view.attention.shape == (2 * 2, 4)                      # (layers·heads, n)
    torch.testing.assert_close(view.attention.sum(-1), torch.ones(4))
    assert next_token_view(model, vocab, "").tokens == ["<bos>"]
    with pytest.raises(ValueError, match="shorten it"):
        next_token_view(model, vocab, "i am " * 5)


def test_next_token_table_matches_the_library_filter():
    logits = torch.tensor([2.0, 0.5, 1.0, -1.0, 0.0, 3.0])
    table = next_token_table(logits, temperature=1.0, top_k=3, top=4)
    assert table["ids"].tolist() == [5, 0, 2, 1]                     # by logit, best first
    assert table["kept"].tolist() == [True, True, True, False]
    assert table["num_kept"] == 3
    probs = torch.softmax(logits, -1)
    assert table["kept_mass"] == pytest.approx(float(probs[[5, 0, 2]].sum()))
    hot = next_token_table(logits, temperature=0.5, top_p=0.9, top=6)
    kept = filter_logits(logits / 0.5, None, 0.9) > -math.inf
    assert hot["num_kept"] == int(kept.sum())
    assert next_token_table(logits, 1.0, top_k=0)["num_kept"] == 6  # 0 means off


def test_sliders_grey_out_removed_tokens_and_change_the_readout(tiny):
    model, vocab = tiny
    explorer = SamplingExplorer(model, vocab, prompt="i am")
    start = explorer.readout.value
    assert f"kept {len(vocab)} tokens" in start and "read: &lt;bos&gt; i am" in start
    shown = min(TOP, len(vocab))
    assert all(bar.get_facecolor() != matplotlib.colors.to_rgba(REMOVED)
               for bar in explorer.bars[:shown])
    before_png = explorer.view.value
    explorer.controls["top_k"].value = 3
    grey = [bar.get_facecolor() == matplotlib.colors.to_rgba(REMOVED) for bar in explorer.bars]
    assert grey[:3] == [False] * 3 and all(grey[3:shown])
    assert "kept 3 tokens" in explorer.readout.value and "top-k 3" in explorer.readout.value
    assert explorer.view.value != before_png
    explorer.controls["top_k"].value = 0
    explorer.controls["top_p"].value = 0.05
    assert "kept 1 tokens" in explorer.readout.value


def test_temperature_reshapes_the_bars_and_the_seed_fixes_the_sample(tiny):
    model, vocab = tiny
    explorer = SamplingExplorer(model, vocab, prompt="i am")
    widths = [bar.get_width() for bar in explorer.bars]
    explorer.controls["temperature"].value = 0.3
    sharp = [bar.get_width() for bar in explorer.bars]
    assert sharp[0] > widths[0] and sharp[-1] < widths[-1]
    sample = explorer.state["continuation"]
    explorer.controls["temperature"].value = 1.0
    explorer.controls["temperature"].value = 0.3
    assert explorer.state["continuation"] == sample                 # same seed, same words


def test_a_new_prompt_relabels_and_a_bad_one_is_one_line(tiny):
    model, vocab = tiny
    explorer = SamplingExplorer(model, vocab, prompt="i am")
    explorer.controls["prompt"].value = "you are"
    labels = [t.get_text() for t in explorer.heat_ax.get_xticklabels()]
    assert labels == ["<bos>", "you", "are"]
    assert "read: &lt;bos&gt; you are" in explorer.readout.value
    explorer.controls["prompt"].value = "i am " * 5
    assert explorer.readout.value.startswith("<b>ValueError:</b>")
    assert "shorten it" in explorer.readout.value and "\n" not in explorer.readout.value


def test_the_continuation_cache_samples_what_continue_prompt_samples(tiny):
    model, vocab = tiny
    cache = ContinuationCache(model, vocab)
    for prompt in ("i am", "", "she is not"):
        for temperature in (0.2, 1.0, 2.0):
            for top_k, top_p in ((None, 1.0), (2, 1.0), (None, 0.5), (3, 0.9)):
                expected = continue_prompt(model, vocab, prompt, 6, temperature=temperature,
                                           top_k=top_k, top_p=top_p,
                                           generator=torch.Generator().manual_seed(0))
                assert cache.continuation(prompt, 6, temperature=temperature, top_k=top_k,
                                          top_p=top_p, seed=0) == expected
        greedy = continue_prompt(model, vocab, prompt, 6, greedy=True)
        assert cache.continuation(prompt, 6, greedy=True, temperature=0.0) == greedy   # T unused
    assert len(cache.nodes) < 3 * 3 * 4 * 6                         # prefixes are shared
    with pytest.raises(ValueError, match="shorten it"):
        cache.continuation("i am " * 5, 6)


def test_a_setting_seen_before_shows_the_same_picture_and_words(tiny):
    model, vocab = tiny
    explorer = SamplingExplorer(model, vocab, prompt="i am")
    first, words = explorer.view.value, explorer.readout.value
    explorer.controls["temperature"].value = 0.4
    explorer.controls["prompt"].value = "you are"
    assert explorer.view.value != first
    explorer.controls["prompt"].value = "i am"
    explorer.controls["temperature"].value = 1.0
    assert explorer.view.value == first and explorer.readout.value == words
    assert [t.get_text() for t in explorer.heat_ax.get_xticklabels()] == ["<bos>", "i", "am"]


def _fake_run(steps=(0, 10, 20)):
    model = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=8, num_hiddens=8, num_heads=2,
                                            num_blks=2, attention_only=True, max_len=8))
    checkpoints = []
    for i, step in enumerate(steps):
        attention = torch.full((2, 2, 4, 4), 0.25)
        attention[1, 1] = torch.eye(4) * (i + 1) / len(steps)
        checkpoints.append(InductionCheckpoint(step, 2.0, 2.0 - i, torch.tensor([[0.1, 0.2 + i / 10],
                                                                                 [0.0, 0.0]]),
                                               torch.tensor([[0.0, 0.0], [0.3, 0.1 * i]]),
                                               attention))
    return InductionRun(model, [1.0] * 20, checkpoints, torch.tensor([[1, 2, 1, 2]]))


def test_induction_slider_moves_the_marker_maps_and_readout():
    explorer = InductionExplorer(_fake_run())
    assert tuple(explorer.controls["step"].options) == (0, 10, 20)
    assert explorer.readout.value.startswith("step 20")
    assert len(explorer.images) == 4                                 # 2 layers x 2 heads
    before = explorer.images[3].get_array().copy()
    explorer.controls["step"].value = 0
    assert list(explorer.marker.get_xdata()) == [0, 0]
    assert (explorer.images[3].get_array() != before).any()
    text = explorer.readout.value
    assert "second copy 2.00" in text and "previous-token score 0.20 (head 2)" in text
    assert "layer 2 induction score 0.30 (head 1)" in text


def test_checkpoint_summary_of_the_shipped_run():
    run, _, _ = train_or_load_induction(LESSON_INDUCTION)
    last = checkpoint_summary(run.checkpoints[-1])
    first = checkpoint_summary(run.checkpoints[0])
    assert last["induction"] > 0.6 > first["induction"]
    assert last["second"] < 1 < first["second"]
    with pytest.raises(ValueError, match="no checkpoints"):
        InductionExplorer(InductionRun(run.model, [], [], run.eval_tokens))


def test_a_prompt_layer_from_the_cache_gives_the_uncached_picture(tiny):
    """The prompt's tick labels and attention map are a cached layer: going back to a prompt
    with a new slider value pastes it, and the picture is the one drawn without any cache."""
    import io
    import numpy as np
    from PIL import Image
    from utils.widgets.base import GlyphCachingCanvas
    model, vocab = tiny
    explorer = SamplingExplorer(model, vocab, prompt="i am")
    steps = (("prompt", "you are"), ("temperature", 0.4), ("prompt", "i am"), ("top_k", 3),
             ("prompt", "you are"), ("top_p", 0.5))
    shown = []
    for name, value in steps:
        explorer.controls[name].value = value
        shown.append(explorer.view.value)
    fresh = SamplingExplorer(model, vocab, prompt="i am")
    for (name, value), png in zip(steps, shown):
        fresh.controls[name].value = value
        GlyphCachingCanvas(fresh.fig)                          # no glyphs kept
        fresh._background = None                               # no background, layers, frames
        pictures = [np.asarray(Image.open(io.BytesIO(p)).convert("RGB"))
                    for p in (png, fresh.render_png())]
        assert np.array_equal(*pictures), (name, value)
