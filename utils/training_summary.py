"""A translation model's training run in one line, in the notebook's language.

    training_summary(result) -> "loss 0.410 per token (book's measure 0.041), 2439 tokens/s, ..."

``utils.training.TrainResult.summary`` says the same in English. It cannot speak Chinese: its
module is part of the code every shipped model's cache key hashes (``utils.code_fingerprint``),
so an edit there would retire them all. Lessons 4 and 7 print this one instead.
"""

from utils.i18n import _


def training_summary(result) -> str:
    """Loss per target token, the book's loss measure, speed and time of a ``TrainResult``."""
    return _("loss {loss} per token (book's measure {book_loss}), {rate} tokens/s, {seconds} s "
             "for {epochs} epochs").format(
        loss=f"{result.loss:.3f}", book_loss=f"{result.book_loss:.3f}",
        rate=f"{result.tokens_per_sec:.0f}", seconds=f"{result.seconds:.1f}", epochs=result.epochs)
