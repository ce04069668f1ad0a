"""Induction heads (lesson 8; Olsson et al., 2022, "In-context learning and induction heads").

The task: a block of ``block_len`` random tokens followed by the same block again. The first
copy cannot be predicted; the second can, by a two-step circuit in a 2-layer attention-only
model: a *previous-token head* (layer 1) writes "the token before me was A" into each position,
and an *induction head* (layer 2) at a position holding A looks for the earlier position whose
previous token was A, i.e. the position right after the previous occurrence of A, and copies
the token found there.

    repeated_block_batch(batch_size, block_len, vocab_size, generator=None, *, min_block_len=None)
                                              -> (b, 2·block_len)
    copy_masks(tokens)                        -> (first, second) (b, n - 1) masks of predictions
    next_token_losses(model, tokens)          -> (b, n - 1) loss of predicting token i + 1
    per_position_loss(model, tokens)          -> (n - 1,) the same, averaged over the batch
    copy_losses(model, tokens)                -> {"first": float, "second": float}
    second_copy_loss(model, tokens)           -> scalar tensor
    previous_token_score(weights)             (b, h, n, n) -> (h,) mean weight on key i - 1
    induction_score(weights, tokens)          (b, h, n, n) -> (h,) mean weight on the key right
                                              after the previous occurrence of the query's token
    head_scores(model, tokens)                -> {"previous_token": (L, h), "induction": (L, h)}
    train_induction(config=INDUCTION_MODEL, steps=..., ...) -> InductionRun
    InductionSettings, LESSON_INDUCTION     the lesson's run (one head per layer, 4,000 steps,
                                            training tokens drawn with replacement)
    train_or_load_induction(settings=LESSON_INDUCTION) -> (InductionRun, file, from_cache)

The lesson's run ships under ``assets/models`` (``python -m utils.induction`` makes it again):
4,000 steps take about 30 s on one thread, but a run on another CPU differs by round-off and
its sudden drop can come a few hundred steps earlier or later, so every machine shows the
shipped one, the same as the lesson's text.
"""

import argparse
import dataclasses
import hashlib
import json
import os
import pathlib
import sys
import warnings

import torch
from torch.nn import functional as F

from utils.code_fingerprint import code_fingerprint
from utils.i18n import _
from utils.language_model import DecoderOnlyConfig, DecoderOnlyLM
from utils.validation import check_flag, check_positive_int


# ============================================================================ the data

def repeated_block_batch(batch_size: int, block_len: int, vocab_size: int, generator=None, *,
                         min_block_len=None, distinct: bool = True) -> torch.Tensor:
    """Tokens (b, 2·block_len): ``block_len`` distinct random tokens, then the same block again.

    All tokens of a row are distinct apart from the repeat (drawn without replacement), so every
    token of the second copy has exactly one earlier occurrence: the induction target is
    unambiguous. With ``distinct=False`` the tokens are drawn with replacement instead (a token
    may recur inside a block, as in Olsson et al.'s random sequences; the scores below assume
    distinct tokens, so measure on a distinct batch). With ``min_block_len``, each row's block
    length is drawn uniformly from ``min_block_len .. block_len`` and the row starts with
    filler tokens, so the distance between the copies varies: a head can no longer find the
    earlier copy by position alone and has to use the tokens (this is what makes the model
    build real induction heads).
    """
    for name, value in (("batch_size", batch_size), ("block_len", block_len),
                        ("vocab_size", vocab_size)):
        check_positive_int(name, value)
    shortest = block_len if min_block_len is None else min_block_len
    if isinstance(shortest, bool) or not isinstance(shortest, int) or not 1 <= shortest <= block_len:
        raise ValueError(_("min_block_len must be an integer in 1..block_len={block_len}, got "
                           "{min_block_len!r}; or None for one block length").format(
            block_len=block_len, min_block_len=min_block_len))
    check_flag("distinct", distinct)
    n = 2 * block_len
    distinct_needed = n - shortest                                         # filler + block
    if distinct and distinct_needed > vocab_size:
        raise ValueError(_("rows need {distinct_needed} distinct tokens but "
                           "vocab_size={vocab_size}; use a shorter block, a larger min_block_len "
                           "or a larger vocabulary").format(
            distinct_needed=distinct_needed, vocab_size=vocab_size))
    if distinct:
        fresh = torch.rand(batch_size, vocab_size, generator=generator).argsort(dim=1)  # (b, V)
    else:
        fresh = torch.randint(0, vocab_size, (batch_size, n), generator=generator)     # (b, n)
    lens = torch.randint(shortest, block_len + 1, (batch_size,), generator=generator)  # (b,)
    starts = n - 2 * lens                                # filler length = first copy's start
    position = torch.arange(n)[None, :]                                    # (1, n)
    # Position p < start holds filler p; in the first copy it holds block token p - start, and
    # in the second copy the same token as ``len`` positions earlier.
    index = position - torch.where(position >= (starts + lens)[:, None], lens[:, None], 0)
    return fresh.gather(1, index)                                          # (b, n)


def copy_masks(tokens: torch.Tensor):
    """Which next-token predictions belong to each copy: tokens (b, n) -> two (b, n - 1) masks.

    Entry i is the prediction of token i + 1 from token i. Second copy: tokens i and i + 1 both
    occurred before (an induction head can copy i + 1). First copy: tokens i and i + 1 both
    occur again later. The first token of each copy is in neither: nothing before it tells it.
    """
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.shape[1] < 2 \
            or tokens.is_floating_point():
        shape = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__
        raise ValueError(_("tokens must be an integer tensor (batch, steps >= 2), got {shape}; "
                           "make them with repeated_block_batch").format(shape=shape))
    same = tokens[:, :, None] == tokens[:, None, :]                        # (b, i, j)
    seen_before = (same & torch.ones_like(same[0]).tril(-1)).any(-1)       # (b, n)
    seen_after = (same & torch.ones_like(same[0]).triu(1)).any(-1)         # (b, n)
    second = seen_before[:, :-1] & seen_before[:, 1:]                      # (b, n - 1)
    first = seen_after[:, :-1] & seen_after[:, 1:] & ~seen_before[:, :-1]  # (b, n - 1)
    if not second.any(dim=1).all():
        raise ValueError(_("a row of tokens has no repeated pair of tokens to predict; make them "
                           "with repeated_block_batch (block_len >= 2)"))
    return first, second


# ============================================================================ losses

def next_token_losses(model: DecoderOnlyLM, tokens: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of predicting token i + 1 from tokens 0..i: tokens (b, n) -> (b, n - 1)."""
    logits, _ = model(tokens[:, :-1])                                      # (b, n - 1, V)
    return F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none")


def per_position_loss(model: DecoderOnlyLM, tokens: torch.Tensor) -> torch.Tensor:
    """``next_token_losses`` averaged over the batch: tokens (b, n) -> (n - 1,)."""
    return next_token_losses(model, tokens).mean(dim=0)


def _masked_mean(values, mask):
    return (values * mask).sum() / mask.sum()


def copy_losses(model: DecoderOnlyLM, tokens: torch.Tensor) -> dict:
    """Mean loss on the first copy and on the second copy (see ``copy_masks``), as floats."""
    first, second = copy_masks(tokens)
    with torch.no_grad():
        losses = next_token_losses(model, tokens)                          # (b, n - 1)
    return {"first": float(_masked_mean(losses, first)),
            "second": float(_masked_mean(losses, second))}


def second_copy_loss(model: DecoderOnlyLM, tokens: torch.Tensor) -> torch.Tensor:
    """Mean loss on the predictable tokens of the second copy (a scalar tensor with gradient)."""
    _, second = copy_masks(tokens)
    return _masked_mean(next_token_losses(model, tokens), second)


# ============================================================================ head scores

def check_square_weights(weights) -> None:
    if not isinstance(weights, torch.Tensor) or weights.dim() != 4 \
            or weights.shape[-1] != weights.shape[-2]:
        shape = tuple(weights.shape) if isinstance(weights, torch.Tensor) else \
            type(weights).__name__
        raise ValueError(_("weights must be one layer's self-attention (batch, heads, n, n), got "
                           "{shape}; pass model.attention_weights[layer] after a forward without "
                           "state").format(shape=shape))


def previous_token_score(weights: torch.Tensor) -> torch.Tensor:
    """Mean weight each head puts on the previous position: (b, h, n, n) -> (h,).
    1 for a perfect previous-token head; queries 1..n-1 count."""
    check_square_weights(weights)
    on_previous = weights.diagonal(offset=-1, dim1=-2, dim2=-1)            # (b, h, n - 1)
    return on_previous.mean(dim=(0, 2))


def induction_targets(tokens: torch.Tensor) -> torch.Tensor:
    """For each query i, the position right after the latest earlier occurrence of token i,
    or -1 when token i has not occurred before: tokens (b, n) -> (b, n)."""
    n = tokens.shape[1]
    same = tokens[:, :, None] == tokens[:, None, :]                        # (b, query, key)
    earlier = torch.ones(n, n, dtype=torch.bool).tril(diagonal=-1)         # key < query
    positions = torch.arange(n).expand(n, n)                               # key index
    latest = torch.where(same & earlier, positions, -1).amax(dim=-1)       # (b, n), -1 if none
    return torch.where(latest >= 0, latest + 1, -1)


def induction_score(weights: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Mean weight each head puts on the induction target (see ``induction_targets``), over
    the queries that have one: weights (b, h, n, n), tokens (b, n) -> (h,).
    1 for a perfect induction head."""
    check_square_weights(weights)
    if tokens.shape != (weights.shape[0], weights.shape[-1]):
        raise ValueError(_("tokens {tokens_shape} do not match weights {weights_shape}; pass the "
                           "tokens the model just read").format(
            tokens_shape=tuple(tokens.shape), weights_shape=tuple(weights.shape)))
    targets = induction_targets(tokens)                                    # (b, n)
    has_target = targets >= 0                                              # (b, n)
    if not has_target.any():
        raise ValueError(_("no token occurs twice, so there is no induction target; use "
                           "repeated_block_batch"))
    index = targets.clamp(min=0)[:, None, :, None].expand(-1, weights.shape[1], -1, 1)
    on_target = weights.gather(-1, index)[..., 0]                          # (b, h, n)
    mask = has_target[:, None, :].to(weights.dtype)                        # (b, 1, n)
    return (on_target * mask).sum(dim=(0, 2)) / mask.sum(dim=(0, 2))


@torch.no_grad()
def head_scores(model: DecoderOnlyLM, tokens: torch.Tensor) -> dict:
    """Previous-token and induction scores of every head, each (layers, heads), in eval mode."""
    was_training = model.training
    model.eval()
    model(tokens)
    weights = model.attention_weights                                      # [L] (b, h, n, n)
    model.train(was_training)
    return {"previous_token": torch.stack([previous_token_score(w) for w in weights]),
            "induction": torch.stack([induction_score(w, tokens) for w in weights])}


# ============================================================================ training

# The experiment's model: two layers of attention only (no FFN), as in Olsson et al., with one
# head per layer (with four heads per layer, runs here learned the copy task with the work spread
# over several heads, and no map showed a clean previous-token or induction head).
INDUCTION_MODEL = DecoderOnlyConfig(vocab_size=64, num_hiddens=64, num_heads=1, num_blks=2,
                                    attention_only=True, max_len=64)


@dataclasses.dataclass
class InductionCheckpoint:
    """What the model does at one training step, measured on a fixed evaluation batch.

    attention: (layers, heads, n, n), the weights on the batch's first sequence.
    """

    step: int
    first_copy_loss: float
    second_copy_loss: float
    previous_token: torch.Tensor       # (layers, heads)
    induction: torch.Tensor            # (layers, heads)
    attention: torch.Tensor            # (layers, heads, n, n)


@dataclasses.dataclass
class InductionRun:
    model: DecoderOnlyLM
    losses: list                       # training loss (all positions) per step
    checkpoints: list                  # InductionCheckpoint, in step order
    eval_tokens: torch.Tensor          # (eval_batch_size, 2·block_len)


@torch.no_grad()
def _checkpoint(model, step: int, tokens) -> InductionCheckpoint:
    was_training = model.training
    model.eval()
    losses = copy_losses(model, tokens)
    scores = head_scores(model, tokens)
    attention = torch.stack([w[0] for w in model.attention_weights])       # (L, h, n, n)
    model.train(was_training)
    return InductionCheckpoint(step, losses["first"], losses["second"], scores["previous_token"],
                               scores["induction"], attention)


def train_induction(config: DecoderOnlyConfig = INDUCTION_MODEL, steps: int = 600, *,
                    block_len: int = 12, min_block_len=4, batch_size: int = 32,
                    lr: float = 3e-3, seed: int = 0,
                    num_checkpoints: int = 5, eval_batch_size: int = 64,
                    num_threads: int | None = None, distinct: bool = True) -> InductionRun:
    """Train ``config``'s model with Adam on fresh repeated-block batches, predicting every next
    token of ``repeated_block_batch(batch_size, block_len, ..., min_block_len=min_block_len,
    distinct=distinct)`` (min_block_len None: every block has block_len tokens, and the model
    may find the earlier copy by position alone). The checkpoints measure on a fixed batch of
    distinct tokens, where every induction target is unambiguous. Returns the per-step losses
    and ``num_checkpoints`` checkpoints evenly spread over steps 0..steps. Seeded: the same
    arguments give the same run; the global random state is left as it was. ``num_threads``
    sets PyTorch's intra-op threads for the run (then restored).
    """
    if not isinstance(config, DecoderOnlyConfig):
        raise ValueError(_("config must be a DecoderOnlyConfig, got {config_type}; use e.g. "
                           "INDUCTION_MODEL").format(config_type=type(config).__name__))
    for name, value in (("steps", steps), ("block_len", block_len), ("batch_size", batch_size),
                        ("eval_batch_size", eval_batch_size)):
        check_positive_int(name, value)
    if not isinstance(num_checkpoints, int) or num_checkpoints < 2:
        raise ValueError(_("num_checkpoints must be an integer >= 2 (the first and last step), "
                           "got {num_checkpoints!r}").format(num_checkpoints=num_checkpoints))
    if 2 * block_len > config.max_len:
        raise ValueError(_("sequences of 2·{block_len} tokens need max_len >= {length}, the "
                           "config has {max_len}; use a shorter block").format(
            block_len=block_len, length=2 * block_len, max_len=config.max_len))
    if block_len < 2:
        raise ValueError(_("block_len must be >= 2 so the second copy has a predictable token, "
                           "got {block_len}").format(block_len=block_len))
    if not lr > 0:
        raise ValueError(_("lr must be > 0, got {lr!r}").format(lr=lr))
    checkpoint_steps = sorted({round(i * steps / (num_checkpoints - 1))
                               for i in range(num_checkpoints)})
    data = torch.Generator().manual_seed(seed)
    def batch(size, generator, distinct_tokens):
        return repeated_block_batch(size, block_len, config.vocab_size, generator,
                                    min_block_len=min_block_len, distinct=distinct_tokens)

    eval_tokens = batch(eval_batch_size, torch.Generator().manual_seed(seed + 1), True)
    saved_threads = torch.get_num_threads()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        try:
            model = DecoderOnlyLM(config)
            optimizer = torch.optim.Adam(model.parameters(), lr=lr)
            losses, checkpoints = [], []
            for step in range(steps + 1):
                if step in checkpoint_steps:
                    checkpoints.append(_checkpoint(model, step, eval_tokens))
                if step == steps:
                    break
                model.train()
                tokens = batch(batch_size, data, distinct)             # (b, 2·block_len)
                loss = per_position_loss(model, tokens).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
        finally:
            torch.set_num_threads(saved_threads)
    model.eval()
    return InductionRun(model, losses, checkpoints, eval_tokens)


# ============================================================================ the lesson's run

@dataclasses.dataclass(frozen=True)
class InductionSettings:
    """The arguments of ``train_induction`` that decide a run (the model: ``config``)."""

    config: DecoderOnlyConfig = INDUCTION_MODEL
    steps: int = 4000
    block_len: int = 12
    min_block_len: int | None = 4
    batch_size: int = 32
    lr: float = 1e-3
    seed: int = 0
    num_checkpoints: int = 17              # every 250 steps
    eval_batch_size: int = 64
    distinct: bool = False                 # training tokens drawn with replacement

    def key(self) -> str:
        """A hash of the settings, the code (``utils.code_fingerprint``) and torch's version."""
        text = json.dumps({"settings": dataclasses.asdict(self),
                           "code": code_fingerprint("utils.induction"),
                           "torch": torch.__version__.split("+")[0]}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def file_name(self) -> str:
        return f"induction-{self.key()}.pt"


LESSON_INDUCTION = InductionSettings()


def run_settings(settings: InductionSettings, **overrides) -> InductionSettings:
    """``settings`` with some fields replaced (e.g. ``steps=200`` for a quick check)."""
    return dataclasses.replace(settings, **overrides)


def train_run(settings: InductionSettings = LESSON_INDUCTION,
              num_threads: int | None = 1) -> InductionRun:
    """``train_induction`` with ``settings`` (one thread by default: fastest for this size)."""
    fields = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
    config = fields.pop("config")
    steps = fields.pop("steps")
    return train_induction(config, steps, num_threads=num_threads, **fields)


def save_run(run: InductionRun, settings: InductionSettings, folder: pathlib.Path) -> pathlib.Path:
    """Write ``run`` as ``<folder>/induction-<key>.pt`` (atomically) and return the path."""
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / settings.file_name()
    partial = file.with_suffix(f".{os.getpid()}.part")
    torch.save({"state_dict": run.model.state_dict(), "losses": run.losses,
                "eval_tokens": run.eval_tokens,
                "checkpoints": [dataclasses.asdict(c) for c in run.checkpoints]}, partial)
    os.replace(partial, file)
    return file


def load_run(file: pathlib.Path, settings: InductionSettings) -> InductionRun:
    saved = torch.load(file, map_location="cpu", weights_only=True)
    model = DecoderOnlyLM(settings.config)
    model.load_state_dict(saved["state_dict"])
    model.eval()
    checkpoints = [InductionCheckpoint(**c) for c in saved["checkpoints"]]
    return InductionRun(model, list(saved["losses"]), checkpoints, saved["eval_tokens"])


def train_or_load_induction(settings: InductionSettings = LESSON_INDUCTION, *,
                            use_cache: bool = True):
    """The run of ``settings``: from the user's cache, else the shipped file, else trained
    (and cached). Returns (InductionRun, file, from_cache)."""
    from utils.model_cache import SHIPPED_DIR, model_cache_dir

    cache_file = model_cache_dir() / settings.file_name()
    if use_cache:
        for candidate in (cache_file, SHIPPED_DIR / settings.file_name()):
            if candidate.is_file():
                try:
                    return load_run(candidate, settings), candidate, True
                except Exception as error:    # noqa: BLE001 - unreadable: train again
                    warnings.warn(_("ignoring the stored run {candidate} ({error}); "
                                    "retraining").format(candidate=candidate, error=error),
                                  UserWarning, stacklevel=2)
    run = train_run(settings)
    if use_cache:
        save_run(run, settings, cache_file.parent)
    return run, cache_file, False


def main(argv=None) -> int:
    """``python -m utils.induction [--steps N] [--out DIR]``: train the lesson's run and write
    it (default: ``assets/models``, with ``SHA256SUMS`` updated)."""
    from utils.model_cache import SHIPPED_DIR
    from utils.shipped_models import write_checksums

    parser = argparse.ArgumentParser(description="Train and write lesson 8's induction run.")
    parser.add_argument("--steps", type=int, help="train this many steps instead (a check)")
    parser.add_argument("--out", type=pathlib.Path, default=SHIPPED_DIR)
    args = parser.parse_args(argv)
    settings = LESSON_INDUCTION
    if args.steps is not None:
        if args.steps < 1:
            parser.error(f"--steps must be >= 1, got {args.steps}")
        settings = run_settings(settings, steps=args.steps,
                                num_checkpoints=min(settings.num_checkpoints, args.steps + 1))
    run = train_run(settings)
    file = save_run(run, settings, args.out)
    last = run.checkpoints[-1]
    print(f"induction: {settings.steps} steps, second-copy loss {last.second_copy_loss:.2f} "
          f"(first copy {last.first_copy_loss:.2f}) -> {file}")
    print(f"checksums: {write_checksums(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
