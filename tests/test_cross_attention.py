"""utils.cross_attention: a Transformer's encoder–decoder attention on reference translations."""

import pytest
import torch

from utils.alignment import score_maps
from utils.cross_attention import (MEAN, score_heads, teacher_forced_cross_attention,
                                   top1_grid)
from utils.data import BOS, EOS, Vocab
from utils.gold_alignment import GoldPair
from utils.i18n import text_columns
from utils.transformer import Transformer

NUM_STEPS = 8
GOLD = [
    GoldPair(1, ("monotone",), ("i", "lost", "."), ("j'ai", "perdu", "."),
             frozenset({(0, 0), (1, 1), (2, 2)}), frozenset({(0, 0), (1, 1), (2, 2)})),
    GoldPair(2, ("monotone",), ("he's", "calm", "."), ("il", "est", "calme", "."),
             frozenset({(0, 0), (0, 1), (1, 2), (2, 3)}),
             frozenset({(0, 0), (0, 1), (1, 2), (2, 3)})),
    GoldPair(3, (), ("go", "."), ("va", "!"), frozenset({(0, 0)}), frozenset({(0, 0)})),
]


@pytest.fixture(scope="module")
def toy():
    src = Vocab([["go", ".", "i", "lost", "he's", "calm"]] * 2)
    tgt = Vocab([["va", "!", "j'ai", "perdu", ".", "il", "est", "calme"]] * 2)
    torch.manual_seed(0)
    model = Transformer(len(src), len(tgt), 16, 32, 4, 2, 0.1)       # dropout: eval matters
    return model, src, tgt


def test_shape_and_rows_sum_to_one(toy):
    model, src, tgt = toy
    weights = teacher_forced_cross_attention(model, "he's calm .", "il est calme .", src, tgt,
                                             NUM_STEPS)
    assert weights.shape == (2, 4, 4 + 1, 3 + 1)     # (layers, heads, French + 1, English + 1)
    assert weights.device.type == "cpu" and weights.dtype == torch.float32
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(2, 4, 5), rtol=0, atol=1e-6)
    tokens = teacher_forced_cross_attention(model, ["he's", "calm", "."],
                                            ("il", "est", "calme", "."), src, tgt, NUM_STEPS)
    torch.testing.assert_close(tokens, weights, rtol=0, atol=0)


def test_equals_the_weights_the_decoder_stores(toy):
    """The same numbers as a plain forward pass over the padded source and <bos> + reference."""
    model, src, tgt = toy
    model.train()
    weights = teacher_forced_cross_attention(model, "i lost .", "j'ai perdu .", src, tgt,
                                             NUM_STEPS)
    assert model.training                                # the mode comes back
    model.eval()
    X = torch.tensor([src[["i", "lost", ".", EOS]] + [src["<pad>"]] * (NUM_STEPS - 4)])
    Y = torch.tensor([tgt[[BOS, "j'ai", "perdu", "."]]])
    valid = torch.tensor([4])
    with torch.no_grad():
        model(X, Y, valid)
    stored = torch.stack([w[0] for w in model.decoder.attention_weights[1]])   # (L, H, 4, 8)
    assert stored.shape == (2, 4, 4, NUM_STEPS)
    assert stored[..., 4:].abs().max() == 0                  # padding columns get nothing
    torch.testing.assert_close(weights, stored[..., :4], rtol=0, atol=0)
    model.train()


def test_bad_targets_raise(toy):
    model, src, tgt = toy
    with pytest.raises(ValueError, match="the target must have 1 to 7 words, got 0"):
        teacher_forced_cross_attention(model, "go .", "", src, tgt, NUM_STEPS)
    with pytest.raises(ValueError, match="got 8"):
        teacher_forced_cross_attention(model, "go .", "va " * 7 + "!", src, tgt, NUM_STEPS)
    with pytest.raises(ValueError, match="must be a str or a list of str tokens"):
        teacher_forced_cross_attention(model, "go .", 3, src, tgt, NUM_STEPS)
    with pytest.raises(ValueError, match="pass it preprocessed"):
        teacher_forced_cross_attention(model, ["go!"], "va !", src, tgt, NUM_STEPS)


def test_score_heads_scores_every_head_and_each_layer_mean(toy, monkeypatch):
    model, src, tgt = toy
    scores = score_heads(model, src, tgt, GOLD, NUM_STEPS)
    assert (scores.layers, scores.heads) == (2, 4)
    assert set(scores.scores) == {(layer, head) for layer in (1, 2)
                                  for head in (1, 2, 3, 4, MEAN)}
    maps = [teacher_forced_cross_attention(model, p.english, p.french, src, tgt, NUM_STEPS)
            for p in GOLD]
    assert scores.scores[(2, 3)] == score_maps([m[1, 2] for m in maps], GOLD)
    assert scores.scores[(1, MEAN)] == score_maps([m[0].mean(dim=0) for m in maps], GOLD)
    assert all(s.words == 6 and s.pairs == 3 for s in scores.scores.values())   # 6 French words
    layer, head = scores.best()
    assert scores.scores[(layer, head)].top1 == max(scores.scores[(l, h)].top1
                                                    for l in (1, 2) for h in (1, 2, 3, 4))
    grid = top1_grid(scores)
    assert grid.shape == (2, 5) and grid[1, 2] == scores.scores[(2, 3)].top1
    assert grid[0, 4] == scores.scores[(1, MEAN)].top1
    table = scores.table().splitlines()
    assert len(table) == 3 and "mean of heads" in table[0] and table[2].startswith("layer 2")
    top1, aer = scores.scores[(2, 1)].top1, scores.scores[(2, 1)].aer
    assert f"{100 * top1:.0f} % ({aer:.2f})" in table[2]
    monkeypatch.setattr("utils.i18n._language", "zh-CN")         # a Chinese notebook's table
    chinese = scores.table().splitlines()
    assert "各头平均" in chinese[0] and "头 1" in chinese[0] and chinese[2].startswith("第 2 层")
    assert {text_columns(line) for line in chinese} == {text_columns(line) for line in table}
    assert ([text_columns(line[:line.index("%")]) for line in chinese[1:]] ==
            [text_columns(line[:line.index("%")]) for line in table[1:]])     # columns line up
    monkeypatch.setattr("utils.i18n._language", "en")
    drawn = score_heads(model, src, tgt, GOLD, NUM_STEPS, as_drawn=True)
    assert all(s.as_drawn for s in drawn.scores.values())
    with pytest.raises(ValueError, match="no gold pairs"):
        score_heads(model, src, tgt, [], NUM_STEPS)
