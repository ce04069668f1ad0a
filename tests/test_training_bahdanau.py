"""The lesson's model with the book's settings: the book's quality, asserted.

The assertions run on the shipped model of these settings (``assets/models``, made by the
current training code), and a run of its first epochs here follows the shipped run's losses
(``tests/shipped_training.py``). ``ATTENTION_COURSE_FULL_TRAINING=1`` (``make test-training``)
trains it from scratch instead, all 250 epochs (about 3 minutes), and asserts the same.

The book (Chinese edition, 10.4) reports loss 0.020 after 250 epochs and BLEU 1, 1, 0, 1 on
the four sentences below. Its printed loss averages each sentence's token losses over all
``num_steps`` positions (padding included as zeros), i.e. it is our per-token loss divided by
``num_steps``: ``result.book_loss``. We require that figure at or below the book's 0.02-0.03
range, and the mean BLEU (book's definition, k=2) of the four sentences >= 0.75.
"""

import pytest

from utils.bleu import bleu
from tests.shipped_training import assert_training_follows_the_shipped_curve, shipped_or_trained
from utils.seq2seq import BahdanauConfig, train_or_load_bahdanau
from utils.training import greedy_translate, heldout_bleu

SENTENCES = [("go .", "va !"), ("i lost .", "j'ai perdu ."), ("he's calm .", "il est calme ."),
             ("i'm home .", "je suis chez moi .")]


# One intra-op thread for the whole module, training and decoding alike, whichever lane of
# `make test` runs it (tests/conftest.py).
ONE_INTRA_OP_THREAD = True


@pytest.fixture(scope="module")
def trained(course_pairs_file):
    config = BahdanauConfig()
    model, src_vocab, tgt_vocab, result = shipped_or_trained("book_bahdanau",
                                                             train_or_load_bahdanau,
                                                             course_pairs_file)
    print(f"\n{result.summary()}")
    return config, model, src_vocab, tgt_vocab, result


@pytest.mark.slow
def test_training_here_follows_the_shipped_run(trained, course_pairs_file):
    *_, result = trained
    assert_training_follows_the_shipped_curve("book_bahdanau", train_or_load_bahdanau,
                                              course_pairs_file, result)


@pytest.mark.slow
def test_loss_reaches_the_books_range(trained):
    *_, result = trained
    assert result.epochs == 250 and len(result.losses) == 250
    assert result.book_loss < 0.03, f"book's measure {result.book_loss:.4f}"
    assert result.loss < 0.3, f"per-token loss {result.loss:.4f}"
    assert result.losses[-1] < result.losses[0] / 10
    assert result.tokens_per_sec > 0


@pytest.mark.slow
def test_four_sentences_average_bleu_at_least_075(trained):
    config, model, src_vocab, tgt_vocab, _ = trained
    scores = []
    for english, french in SENTENCES:
        translation = greedy_translate(model, english, src_vocab, tgt_vocab, config.num_steps)
        scores.append(bleu(translation.text, french))
        assert translation.ended, f"{english!r} -> no <eos> within {config.num_steps} steps"
        assert translation.attention.shape == (len(translation.output_tokens),
                                               len(translation.source_tokens))
    assert sum(scores) / len(scores) >= 0.75, f"BLEU per sentence {scores}"


@pytest.mark.slow
def test_heldout_corpus_bleu_is_computed_on_unseen_sentences(trained, course_pairs_file):
    config, model, src_vocab, tgt_vocab, _ = trained
    from utils.training import training_pairs
    score, details = heldout_bleu(model, src_vocab, tgt_vocab, config.num_steps,
                                  trained_on=training_pairs(config, course_pairs_file),
                                  path=course_pairs_file)
    assert len(details["predictions"]) == len(details["references"]) > 50
    # 600 memorised pairs generalise poorly, but the model gets many unigrams right.
    assert 0 <= score.score < 50 and score.precisions[0] > 20
