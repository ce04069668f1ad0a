"""Every explorer speaks Chinese after ``set_language("zh-CN")``, with the English numbers.

For each explorer, built twice with the same arguments (English, then Chinese):
- every control's description (and every option label of a menu) holds Chinese, except the
  ones that are identifiers (``IDENTIFIER_CONTROLS``);
- the readout holds Chinese and no English word of 3+ letters besides the data it shows (tokens
  of the sentences and translations) and the identifiers listed in ``ALLOWED_WORDS``;
- the readout's numbers are the English readout's numbers (as a multiset: a translation may put
  them in another order, e.g. "12 of 50" -> "50 个中有 12 个");
- the figure draws without a "missing glyph" warning (no empty boxes).

The language and matplotlib's settings are restored after each test.
"""

import html
import re
import warnings

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from utils.i18n import ENVIRONMENT_VARIABLE, _, set_language  # noqa: E402
from test_widgets_bahdanau import model_and_vocabs  # noqa: F401 - the untrained model fixture

CHINESE = "zh-CN"
HAN = re.compile(r"[\u4e00-\u9fff]")
WORD = re.compile(r"[A-Za-z][A-Za-z'_-]*[A-Za-z]|[A-Za-z]")
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")
# Identifiers and names a Chinese readout keeps, as the lessons' Chinese text does:
# BLEU (the metric's name), top-k / top-p (the filters' names, also the sliders' labels),
# num_steps (an argument), <eos> / <unk> (special tokens), Epanechnikov (a kernel's name).
ALLOWED_WORDS = {"BLEU", "top-k", "top-p", "num_steps", "eos", "unk", "bos", "Epanechnikov"}
# Controls whose label is an identifier, the same in both languages.
IDENTIFIER_CONTROLS = {"top-k", "top-p"}


@pytest.fixture
def languages(monkeypatch):
    """Build in English, then in Chinese: ``languages(factory) -> (english, chinese)``."""
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "en")           # restored after the test
    monkeypatch.setattr("utils.i18n._language", "en")

    def build(factory):
        english = factory()
        with matplotlib.rc_context():                       # the CJK font goes with the test
            set_language(CHINESE)
            try:
                chinese = factory()
                with warnings.catch_warnings():
                    warnings.filterwarnings("error", message=r".*[Gg]lyph.*missing")
                    chinese.render_png()
            finally:
                set_language("en")
        return english, chinese

    return build


def plain(readout_html: str) -> str:
    """The readout as a student reads it: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<(?:/?[a-z]+)>", " ", readout_html))


def english_words(text: str, data_words=()) -> list:
    """Words of 3+ Latin letters in ``text`` that are neither data nor an allowed identifier."""
    allowed = ALLOWED_WORDS | {w for item in data_words for w in WORD.findall(str(item))}
    return [w for w in WORD.findall(text) if len(w) >= 3 and w not in allowed
            and w.strip("'") not in allowed]


def check_pair(english, chinese, data_words=()):
    """The checks every explorer passes (see the module docstring)."""
    for name, control in chinese.controls.items():
        description = control.description
        if description in IDENTIFIER_CONTROLS:
            assert english.controls[name].description == description
            continue
        assert HAN.search(description), f"control {name!r}: {description!r} holds no Chinese"
        assert not english_words(description), (name, description)
        for label in getattr(control, "_options_labels", ()):       # menus; numbers pass
            assert HAN.search(label) or not english_words(label), (name, label)
    zh, en = plain(chinese.readout.value), plain(english.readout.value)
    assert HAN.search(zh), zh
    assert not english_words(zh, data_words), (english_words(zh, data_words), zh)
    assert sorted(NUMBER.findall(zh)) == sorted(NUMBER.findall(en)), (en, zh)
    assert english.readout.value != chinese.readout.value


def test_attention_cues_explorer_in_chinese(languages):
    from utils.widgets.attention_cues import AttentionCuesExplorer
    check_pair(*languages(lambda: AttentionCuesExplorer(query=(1.0, 2.0, 3.0))))


def test_attention_pooling_explorer_in_chinese_with_its_warning(languages):
    from utils.widgets.attention_pooling import AttentionPoolingExplorer
    english, chinese = languages(lambda: AttentionPoolingExplorer(sigma=0.01, kernel="boxcar",
                                                                  n_train=20))
    check_pair(english, chinese)
    assert "⚠" in chinese.readout.value and "测试点" in chinese.readout.value
    assert chinese.controls["kernel"].options[0] == ("高斯", "gaussian")


def test_mask_explorer_in_chinese(languages):
    from utils.widgets.scoring_functions import MaskExplorer

    def build():
        explorer = MaskExplorer()
        explorer.controls["causal"].value = True
        explorer.controls["scoring"].value = "additive"
        return explorer

    english, chinese = languages(build)
    check_pair(english, chinese)
    assert chinese.values() == english.values()               # option values stay English
    assert "因果" in chinese.readout.value


def test_scale_explorer_in_chinese(languages):
    from utils.widgets.scoring_functions import ScaleExplorer
    check_pair(*languages(lambda: ScaleExplorer(num_queries=32)))


@pytest.mark.parametrize("sentence", ["i'm home .", "go . zzzq i am very very happy today ."])
def test_alignment_explorer_in_chinese(languages, model_and_vocabs, sentence):
    from utils.gold_alignment import parse_gold
    from utils.widgets.bahdanau import AlignmentExplorer
    gold = parse_gold("id: 7\ntags: monotone\nen: i'm home .\nfr: je suis chez moi .\n"
                      "sure: 1-1 2-3 2-4 3-5\npossible: 1-2\n")
    references = [("i'm home .", "je suis chez moi ."), ("go .", "va !")]
    english, chinese = languages(lambda: AlignmentExplorer(
        *model_and_vocabs, 10, sentence=sentence, references=references,
        trained_on=[("go .", "va !")], gold=gold))
    state = chinese.state
    data = [sentence, *state["reference"]["references"], *state["translation"].source_tokens,
            *state["translation"].output_tokens, *(state["map"] or {}).get("rows", ()),
            *(" ".join(gold[0].english), " ".join(gold[0].french))]
    check_pair(english, chinese, data)
    assert [label for label, _value in chinese.controls["map_of"].options] == ["模型译文",
                                                                               "参考译文"]


def test_heads_explorer_in_chinese(languages):
    from utils.widgets.multihead import HeadsExplorer

    def build():
        explorer = HeadsExplorer()
        explorer.controls["heads"].value = 12                 # size-1 heads: the extra note
        explorer.controls["valid_len"].value = 5
        return explorer

    english, chinese = languages(build)
    check_pair(english, chinese)
    assert chinese.titles[0].get_text().startswith("头 1")


def test_positional_encoding_explorer_in_chinese(languages):
    from utils.widgets.positional_encoding import PositionalEncodingExplorer
    english, chinese = languages(lambda: PositionalEncodingExplorer(dim=16, positions=(3, 40)))
    check_pair(english, chinese)
    assert chinese.line_labels[0].get_text() == "列 6"


@pytest.fixture(scope="module")
def toy_transformer():
    from utils.data import Vocab
    from utils.transformer import Transformer
    src = Vocab([["go", ".", "i", "lost", "he's", "calm"]] * 2)
    tgt = Vocab([["va", "!", "j'ai", "perdu", ".", "il", "est", "calme"]] * 2)
    torch.manual_seed(0)
    return Transformer(len(src), len(tgt), 16, 32, 4, 2, 0.0).eval(), src, tgt


def test_transformer_attention_explorer_in_chinese(languages, toy_transformer):
    from utils.widgets.transformer import TransformerAttentionExplorer
    model, src, tgt = toy_transformer
    sentence = "go go go go go go go go go zzzq ."                # dropped and unknown words
    english, chinese = languages(lambda: TransformerAttentionExplorer(
        model, src, tgt, num_steps=8, sentence=sentence, sentences=("go .", sentence),
        references={sentence: "va !"}))
    maps = chinese.state["maps"]
    data = [sentence, "va !", *maps.source_tokens, *maps.output_tokens, *maps.decoder_inputs,
            *maps.translation.dropped, *maps.translation.unknown]
    check_pair(english, chinese, data)
    assert chinese.title.get_text().startswith("编码器-解码器注意力")


def fake_demo_runs():
    """Two summaries shaped like ``causal_demo_runs``' (the explorer draws what it is given)."""
    inputs = ["<bos>", "je", "suis", "chez", "moi"]
    runs = {}
    for causal in (True, False):
        attention = np.tril(np.ones((5, 5))) if causal else np.ones((5, 5))
        runs[causal] = {"losses": [3.0, 2.0, 1.5] if causal else [3.0, 1.0, 0.5],
                        "inputs": inputs, "attention": attention / attention.sum(1, keepdims=True),
                        "pairs": [("i'm home .", "je suis chez moi ."), ("go .", "va !")],
                        "translations": ["je suis chez moi .", ""], "bleu": [1.0, 0.0],
                        "final_loss": 1.5 if causal else 0.5,
                        "future_share": 0.0 if causal else 0.42, "mean_bleu": 0.5}
    return runs


def test_causal_mask_explorer_in_chinese(languages):
    from utils.widgets.transformer import CausalMaskExplorer
    runs = fake_demo_runs()
    english, chinese = languages(lambda: CausalMaskExplorer(runs))
    data = ["i'm home .", "je suis chez moi .", "go .", "va !"]
    check_pair(english, chinese, data)
    assert "因果掩码：开" in chinese.readout.value
    with matplotlib.rc_context():               # the saved-notebook text, read in Chinese
        set_language(CHINESE)
        try:
            text = chinese.snapshot_text()
        finally:
            set_language("en")
    assert "另一次运行" in text and not english_words(text, data)


@pytest.fixture(scope="module")
def tiny_lm():
    from utils.data import Vocab
    from utils.language_model import DecoderOnlyConfig, DecoderOnlyLM
    sentences = [s.split() for s in ["i am here .", "i am not sure .", "you are here .",
                                     "we are ready .", "he is tired .", "she is not here ."]]
    vocab = Vocab(sentences, min_freq=1)
    torch.manual_seed(0)
    model = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=len(vocab), num_hiddens=16, num_heads=2,
                                            num_blks=2, ffn_num_hiddens=16, max_len=8)).eval()
    return model, vocab


def test_sampling_explorer_in_chinese(languages, tiny_lm):
    from utils.widgets.sampling import SamplingExplorer
    model, vocab = tiny_lm
    english, chinese = languages(lambda: SamplingExplorer(model, vocab, prompt="i am"))
    data = [*chinese.state["view"].tokens, *chinese.state["continuation"]]
    check_pair(english, chinese, data)
    assert "关" in chinese.readout.value                       # top-k off
    assert chinese.row_labels[0] == "第 1 层 · 头 1"


def test_induction_explorer_in_chinese(languages):
    from utils.induction import InductionCheckpoint, InductionRun
    from utils.language_model import DecoderOnlyConfig, DecoderOnlyLM
    from utils.widgets.induction import InductionExplorer
    model = DecoderOnlyLM(DecoderOnlyConfig(vocab_size=8, num_hiddens=8, num_heads=2,
                                            num_blks=2, attention_only=True, max_len=8))
    checkpoints = [InductionCheckpoint(step, 2.0, 2.0 - i, torch.tensor([[0.1, 0.2 + i / 10],
                                                                         [0.0, 0.0]]),
                                       torch.tensor([[0.0, 0.0], [0.3, 0.1 * i]]),
                                       torch.full((2, 2, 4, 4), 0.25))
                   for i, step in enumerate((0, 10, 20))]
    run = InductionRun(model, [1.0] * 20, checkpoints, torch.tensor([[1, 2, 1, 2]]))
    english, chinese = languages(lambda: InductionExplorer(run))
    check_pair(english, chinese)


def test_a_chinese_plotting_figure_draws_every_glyph(monkeypatch):
    import matplotlib.pyplot as plt
    from utils.plotting import plot, show_heatmaps
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "en")
    with matplotlib.rc_context():
        set_language(CHINESE)
        try:
            grid = show_heatmaps(torch.rand(1, 2, 3, 4), xlabel=_("keys"), ylabel=_("queries"),
                                 titles=[_("heatmap"), _("attention weights")])
            axes = plot([1.0, 2.0, 3.0], [[1.0, 0.5, 0.2], [0.9, 0.8, 0.1]],
                        xlabel=_("epoch"), ylabel=_("training loss"),
                        legend=[_("with mask"), _("without mask")])
            with warnings.catch_warnings():
                warnings.simplefilter("error")             # "Glyph ... missing from font(s)"
                grid.fig.canvas.draw()
                axes.figure.canvas.draw()
            assert grid.axes[0, 0].get_xlabel() == "键"
            assert axes.get_xlabel() == "迭代周期"
        finally:
            set_language("en")
            plt.close("all")


def test_compare_maps_labels_its_colour_bar_in_chinese(monkeypatch):
    import matplotlib.pyplot as plt
    from utils.alignment_plots import compare_maps
    from utils.gold_alignment import parse_gold
    pair = parse_gold("id: 7\ntags: monotone\nen: i'm home .\nfr: je suis chez moi .\n"
                      "sure: 1-1 2-3 2-4 3-5\npossible: 1-2\n")[0]
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "en")
    with matplotlib.rc_context():
        set_language(CHINESE)
        try:
            fig = compare_maps(pair, {"A": torch.rand(6, 4).softmax(-1)})
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                fig.canvas.draw()
            assert fig.axes[-1].get_ylabel() == "权重"
        finally:
            set_language("en")
            plt.close("all")
