"""Lesson 6's exercises (06_self_attention_positional_encoding): the typical mistakes its test cells name, and a
second correct answer to every exercise (see ``grading_fixtures.exercise_kit``)."""

from grading_fixtures.exercise_kit import A, M  # noqa: F401

MISTAKES = [
    # Exercise 1 (predict): each wrong number costs its own check only.
    M("c06-period-pair-21", "predictions", "test_predictions",
      [("10000 ** (20 / 32)", "10000 ** (42 / 32)")],
      "column 21 is not pair j = 21", earns=2),
    M("c06-period-exponent-21", "predictions", "test_predictions",
      [("(20 / 32)", "(21 / 32)")],
      "the exponent of column 21 is not 21/32", earns=2),
    M("c06-period-no-2pi", "predictions", "test_predictions",
      [("predicted_period = 2 * math.pi * 10000", "predicted_period = 10000")],
      "that is 1/ω, not the period", earns=2),
    M("c06-layers-contiguous", "predictions", "test_predictions",
      [("predicted_layers = 7", "predicted_layers = 100")],
      "that is the path for contiguous kernels", earns=2),
    M("c06-layers-one-short", "predictions", "test_predictions",
      [("predicted_layers = 7", "predicted_layers = 6")],
      "one layer short", earns=2),
    M("c06-distinct-every-position", "predictions", "test_predictions",
      [("predicted_distinct = 4", "predicted_distinct = 8")],
      "not one output per position", earns=2),
    # Exercise 2 (find and fix): the bug left in, and other typical shifts.
    M("c06-shift-unchanged", "shift_encodings", "test_shift_encodings",
      [("-2 * torch.arange(d // 2, dtype=torch.float64) / d", "-torch.arange(d // 2, dtype=torch.float64) / d")],
      "pairs after the first turn at the wrong speed", earns=0),
    M("c06-shift-wrong-way", "shift_encodings", "test_shift_encodings",
      [("sin_x * torch.cos(angle) + cos_x * torch.sin(angle)", "sin_x * torch.cos(angle) - cos_x * torch.sin(angle)"),
       ("cos_x * torch.cos(angle) - sin_x * torch.sin(angle)", "cos_x * torch.cos(angle) + sin_x * torch.sin(angle)")],
      "turned the wrong way", earns=0),
    M("c06-shift-one-angle", "shift_encodings", "test_shift_encodings",
      [("angle = delta * omega", "angle = delta * torch.ones_like(omega)")],
      "every pair turns by the same angle", earns=0),
    M("c06-shift-base-ignored", "shift_encodings", "test_shift_encodings",
      [("omega = base **", "omega = 10000.0 **")],
      "the base argument is ignored", earns=2),
    # Exercise 4 (RoPE): a wrong rotation keeps the relative property but not the values.
    M("c06-rope-wrong-direction", "rotary", "test_rotary",
      [("Y[..., 0::2] = x_even * cos - x_odd * sin", "Y[..., 0::2] = x_even * cos + x_odd * sin"),
       ("Y[..., 1::2] = x_even * sin + x_odd * cos", "Y[..., 1::2] = -x_even * sin + x_odd * cos")],
      "turned the wrong way", earns=2),
    M("c06-rope-halves", "rotary", "test_rotary",
      [("x_even, x_odd = X[..., 0::2], X[..., 1::2]", "x_even, x_odd = X[..., :d // 2], X[..., d // 2:]"),
       ("Y[..., 0::2] = x_even", "Y[..., :d // 2] = x_even"),
       ("Y[..., 1::2] = x_even", "Y[..., d // 2:] = x_even")],
      "the pairs are neighbouring features", earns=2),
    M("c06-rope-one-angle", "rotary", "test_rotary",
      [("[:, None] * rates", "[:, None] * torch.ones_like(rates)")],
      "every pair turns by the same angle m", earns=2),
    M("c06-rope-exponent-j", "rotary", "test_rotary",
      [("-torch.arange(0, d, 2, dtype=torch.float64) / d", "-torch.arange(d // 2, dtype=torch.float64) / d")],
      "wrong frequencies: ω_j = base^(-2j/d)", earns=2),
    M("c06-rope-positions-ignored", "rotary", "test_rotary",
      [("torch.as_tensor(positions, dtype=torch.float64)[:, None]",
        "torch.arange(X.shape[-2], dtype=torch.float64)[:, None]")],
      "the positions argument is ignored", earns=2),
    M("c06-rope-base-ignored", "rotary", "test_rotary",
      [("rates = base **", "rates = 10000.0 **")],
      "the base argument is ignored", earns=3),
    M("c06-rope-no-even-check", "rotary", "test_rotary",
      [('    if d % 2:\n        raise ValueError(f"d must be even (the features are rotated in pairs), '
        'got d = {d}")\n', "")],
      "an odd d must raise a ValueError", earns=3),
    # Exercise 5 (decode a position): the wrong pair, sin/cos swapped, asin, wrong ω, base ignored.
    M("c06-decode-fastest-pair", "decode_position", "test_decode_position",
      [("slowest = base ** (-(d - 2) / d)", "slowest = 1.0"),
       ("torch.atan2(P[:, d - 2], P[:, d - 1])", "torch.atan2(P[:, 0], P[:, 1])")],
      "you read the fastest pair", earns=0),
    M("c06-decode-sin-cos-swapped", "decode_position", "test_decode_position",
      [("torch.atan2(P[:, d - 2], P[:, d - 1])", "torch.atan2(P[:, d - 1], P[:, d - 2])")],
      "sin is in the even column and cos in the odd one", earns=0),
    M("c06-decode-asin", "decode_position", "test_decode_position",
      [("torch.atan2(P[:, d - 2], P[:, d - 1])", "torch.asin(P[:, d - 2])")],
      "asin only covers a quarter turn", earns=1),
    M("c06-decode-exponent-j", "decode_position", "test_decode_position",
      [("base ** (-(d - 2) / d)", "base ** (-(d // 2 - 1) / d)")],
      "wrong frequency: the last pair is j = d/2 - 1", earns=0),
    M("c06-decode-base-ignored", "decode_position", "test_decode_position",
      [("slowest = base **", "slowest = 10000.0 **")],
      "the base argument is ignored", earns=2),
]

ALTERNATIVES = [
    A("predictions", '''\
# Your three predictions: numbers (or arithmetic you can do by hand), written before running anything.
predicted_period = 1987.0                 # 2π · 10000^(10/16) ≈ 6.283 · 316.2
predicted_layers = math.ceil(math.log2(101))   # reach 2^L - 1 must cover the 100 gaps: L = 7
predicted_distinct = len(set("ABACBADA"))      # without positions a token's output depends on the token only
'''),
    A("shift_encodings", '''\
def shift_encodings(P, delta, base=10000.0):
    """Each pair as a complex number cos + i sin = e^(i x w), multiplied by e^(i delta w)."""
    n, d = P.shape
    j = torch.arange(d // 2, dtype=torch.float64)
    omega = torch.pow(torch.tensor(float(base), dtype=torch.float64), -2.0 * j / d)
    z = torch.complex(P[:, 1::2].double(), P[:, 0::2].double())           # (n, d/2)
    z = z * torch.polar(torch.ones_like(omega), float(delta) * omega)
    out = torch.empty(n, d, dtype=torch.float64)
    out[:, 0::2], out[:, 1::2] = z.imag, z.real
    return out.to(P.dtype)
'''),
    A("rotary", '''\
def rotary(X, positions, base=10000.0):
    """X (batch, n, d), positions (n,) -> (batch, n, d): pair j of the token at m turned by m * w_j."""
    batch, n, d = X.shape
    if d % 2 != 0:
        raise ValueError(f"rotary needs an even number of features (they come in pairs), not {d}")
    j = torch.arange(d // 2, dtype=torch.float64)
    theta = torch.as_tensor(positions, dtype=torch.float64).reshape(n, 1) * torch.pow(float(base), -2.0 * j / d)
    turn = torch.polar(torch.ones_like(theta), theta)                   # e^(i theta), (n, d/2)
    pairs = torch.view_as_complex(X.to(torch.float64).reshape(batch, n, d // 2, 2).contiguous())
    return torch.view_as_real(pairs * turn).reshape(batch, n, d).to(X.dtype)
'''),
    A("decode_position", '''\
def decode_position(P, base=10000.0):
    """P (n, d) float64 sinusoidal encodings -> (n,) positions: slowest pair first, faster ones refine."""
    n, d = P.shape
    freqs = [base ** (-2 * j / d) for j in range(d // 2)]
    estimate = torch.atan2(P[:, -2], P[:, -1]) / freqs[-1]               # coarse but unambiguous
    for j in reversed(range(d // 2 - 1)):
        phase = torch.atan2(P[:, 2 * j], P[:, 2 * j + 1])                 # known up to whole turns
        turns = torch.round((estimate * freqs[j] - phase) / (2 * math.pi))
        estimate = (phase + 2 * math.pi * turns) / freqs[j]
    return estimate
'''),
]
