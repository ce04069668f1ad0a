"""Helpful checks for exercise test cells: each failure says what was expected and what was found.

Every lesson's ``exercises.ipynb`` imports this module (``from utils.grading import checks``) so
that a wrong answer gets a message a student can act on, e.g.
``expected shape (2, 3, 4) = (batch, queries, keys), got (2, 4, 3)`` instead of a bare assert.
All checks raise ``AssertionError`` (which nbgrader counts as a failed test).
"""

import inspect
import types

import torch

from utils.grading.rubric import Rubric, explain_error   # noqa: F401 - test cells use checks.Rubric
from utils.i18n import _

# Graded functions must be written with plain torch ops: calling the course library's
# finished implementation (or PyTorch's fused attention) would skip the exercise.
FORBIDDEN_MODULES = ("utils.attention", "utils.masking", "utils.grading")
FORBIDDEN_NAMES = ("scaled_dot_product_attention", "soft_address", "scaled_dot_scores",
                   "masked_softmax")


def random_tensor(*shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    """A float32 tensor of the given shape from its own generator (ignores the global seed)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator) * scale


def check_defined(name: str, namespace: dict, hint: str = "") -> object:
    """Return ``namespace[name]``; fail with a pointer to the answer cell if it is missing."""
    if name not in namespace:
        message = (_("`{name}` is not defined: run your answer cell above first ({hint})")
                   if hint else _("`{name}` is not defined: run your answer cell above first"))
        raise AssertionError(message.format(name=name, hint=hint))
    return namespace[name]


# --- Predictions ----------------------------------------------------------------------------
# A predict item's visible checks only see that each prediction is committed and well-formed
# (``prediction``); the truth is computed in the hidden tests, which compare with
# ``judge_prediction`` and print the reveal with ``reveal``: the student reads both in the
# feedback after grading, never before committing.

_FORMS = ("number", "int", "shape", "bool")


def prediction(name: str, namespace: dict, form: str = "number"):
    """The committed prediction ``namespace[name]`` in its form, or a failure saying what is
    missing: "number" (a float), "int", "shape" (a tuple of ints) or "bool"."""
    if form not in _FORMS:
        raise ValueError(f"form must be one of {_FORMS}, got {form!r}")
    value = check_defined(name, namespace, _("set it in your prediction cell, before running "
                                             "anything below"))
    if value is None or value is Ellipsis:
        raise AssertionError(_("{name} is not set yet: write your prediction in its cell")
                             .format(name=name))
    if form == "bool":
        if not isinstance(value, bool):
            raise AssertionError(_("{name} must be True or False, got {value}")
                                 .format(name=name, value=repr(value)))
        return value
    if form == "shape":
        try:
            shape = tuple(value)
        except TypeError:
            raise AssertionError(_("{name} must be a shape, a tuple of ints such as (2, 3), got "
                                   "{value}").format(name=name, value=repr(value))) from None
        if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
            raise AssertionError(_("{name} must be a tuple of sizes (ints >= 0), got {value}")
                                 .format(name=name, value=repr(value)))
        return shape
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not (
            isinstance(value, torch.Tensor) and value.numel() == 1):
        raise AssertionError(_("{name} must be a number, got {value}")
                             .format(name=name, value=repr(value)))
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        raise AssertionError(_("{name} must be a finite number, got {value}")
                             .format(name=name, value=repr(value)))
    if form == "int":
        if number != int(number):
            raise AssertionError(_("{name} must be a whole number, got {value}")
                                 .format(name=name, value=repr(value)))
        return int(number)
    return number


def judge_prediction(name: str, predicted, truth, atol: float = 0.0, rtol: float = 0.0,
                     mistakes=None) -> None:
    """For the hidden tests: fail unless ``predicted`` is within ``atol + rtol·|truth|`` of
    ``truth`` (a shape: equal). A failure names a known mistake (``mistakes`` maps a message to
    the value that mistake predicts) or says how far off the prediction is, never the value."""
    if isinstance(truth, tuple):
        if tuple(predicted) == truth:
            return
        for message, wrong in (mistakes or {}).items():
            if tuple(predicted) == tuple(wrong) and tuple(wrong) != truth:
                raise AssertionError(_("{what}: {message}").format(what=name, message=message))
        axes = [i for i, (p, t) in enumerate(zip(predicted, truth)) if p != t]
        where = (_("{count} axes where the shape has {axes}").format(count=len(predicted),
                                                                     axes=len(truth))
                 if len(predicted) != len(truth) else
                 _("axis {axis} is wrong").format(axis=axes[0]))
        raise AssertionError(_("{name}: not the shape: {where}").format(name=name, where=where))
    predicted, truth = float(predicted), float(truth)
    if abs(predicted - truth) <= atol + rtol * abs(truth):
        return
    for message, wrong in (mistakes or {}).items():
        wrong = float(wrong)
        if abs(wrong - truth) > atol + rtol * abs(truth) and \
                abs(predicted - wrong) <= max(atol + rtol * abs(wrong), 1e-9 * abs(wrong)):
            raise AssertionError(_("{what}: {message}").format(what=name, message=message))
    off = predicted - truth
    percent = f"{abs(off) / abs(truth):.0%}" if truth else ""
    relative = _(" ({percent} of the true value)").format(percent=percent) if truth else ""
    raise AssertionError(_("{name}: off by {off}{relative}; the tolerance is {tolerance}")
                         .format(name=name, off=f"{off:+.4g}", relative=relative,
                                 tolerance=f"{atol + rtol * abs(truth):.3g}"))


def reveal(text: str) -> None:
    """For the hidden tests: print how to see a prediction's true value (shown in the feedback
    after grading, never to a student before submitting)."""
    print(_("see for yourself: {text}").format(text=text))


def not_allowed_line(modules=FORBIDDEN_MODULES, names=FORBIDDEN_NAMES) -> str:
    """The sentence every exercise text shows when its checks call ``check_plain_torch`` with
    these lists: the names that give the exercise 0 points when the answer uses them."""
    separator = _(", ")                      # between listed names
    listed = separator.join(f"`{m}`" for m in modules)
    functions = separator.join(f"`{n}`" for n in names)
    return _("**Not allowed** (an answer that uses one of these gets 0 points for this "
             "exercise): the modules {listed}; the functions {functions}.").format(
                 listed=listed, functions=functions)


def check_tensor(x, what: str) -> torch.Tensor:
    """Fail unless ``x`` is a floating-point torch tensor."""
    if not isinstance(x, torch.Tensor):
        raise AssertionError(_("{what} must be a torch.Tensor, got {type}")
                             .format(what=what, type=type(x).__name__))
    if not x.is_floating_point():
        raise AssertionError(_("{what} must hold floating-point numbers, got dtype {dtype}")
                             .format(what=what, dtype=x.dtype))
    return x


def check_shape(x, expected: tuple, axes: str, what: str) -> None:
    """Fail unless ``x.shape == expected``; ``axes`` names the axes, e.g. "(batch, queries, keys)"."""
    check_tensor(x, what)
    if tuple(x.shape) != tuple(expected):
        raise AssertionError(_("{what}: expected shape {expected} = {axes}, got {got}")
                             .format(what=what, expected=tuple(expected), axes=axes,
                                     got=tuple(x.shape)))


def check_finite(x: torch.Tensor, what: str, hint: str = "") -> None:
    """Fail if ``x`` holds NaN or infinity, naming the first bad position."""
    bad = ~torch.isfinite(x)
    if bad.any():
        index = tuple(int(i) for i in bad.nonzero()[0])
        message = (_("{what} has {value} at index {index}: {hint}") if hint else
                   _("{what} has {value} at index {index}"))
        raise AssertionError(message.format(what=what, value=x[index].item(), index=index,
                                            hint=hint))


def check_close(actual, expected: torch.Tensor, what: str, atol: float = 1e-5,
                rtol: float = 1e-4) -> None:
    """Fail unless ``actual`` matches ``expected`` elementwise; report the worst position."""
    check_tensor(actual, what)
    expected = torch.as_tensor(expected, dtype=torch.float64)
    if tuple(actual.shape) != tuple(expected.shape):
        raise AssertionError(_("{what}: expected shape {expected}, got {got}")
                             .format(what=what, expected=tuple(expected.shape),
                                     got=tuple(actual.shape)))
    check_finite(actual, what)
    actual64 = actual.detach().to(torch.float64)
    excess = (actual64 - expected).abs() - (atol + rtol * expected.abs())   # > 0 where wrong
    if (excess > 0).any():
        index = tuple(int(i) for i in (excess == excess.max()).nonzero()[0])
        raise AssertionError(_("{what}: wrong value at index {index}: expected {expected}, "
                               "got {got}").format(what=what, index=index,
                                                   expected=f"{expected[index].item():.6g}",
                                                   got=f"{actual64[index].item():.6g}"))


def check_rows_sum_to_one(weights: torch.Tensor, what: str = None,
                          axis: str = None, atol: float = 1e-5) -> None:
    """Fail unless ``weights`` (..., queries, keys) sums to 1 over its last axis.

    ``what`` defaults to "weights" and ``axis`` to "key", in the notebook's language."""
    what = _("weights") if what is None else what
    axis = _("key") if axis is None else axis
    check_tensor(weights, what)
    check_finite(weights, what, hint=_("did exp overflow? subtract each row's maximum "
                                       "before exponentiating, or use torch.softmax"))
    sums = weights.detach().to(torch.float64).sum(dim=-1)          # (..., queries)
    wrong = (sums - 1).abs() > atol
    if wrong.any():
        index = tuple(int(i) for i in wrong.nonzero()[0])
        where = (_("query {query} of batch {batch}").format(query=index[-1], batch=index[0])
                 if len(index) > 1 else _("query {query}").format(query=index[-1]))
        raise AssertionError(_("{what} must sum to 1 along the {axis} axis; yours sum to "
                               "{sum} for {where}").format(what=what, axis=axis,
                                                           sum=f"{sums[index].item():.4g}",
                                                           where=where))
    if (weights < 0).any():
        raise AssertionError(_("{what} must be >= 0 (they are probabilities); the smallest is "
                               "{smallest}").format(what=what,
                                                    smallest=f"{weights.min().item():.4g}"))


def check_raises(error: type, fn, *args, what: str, **kwargs) -> None:
    """Fail unless ``fn(*args, **kwargs)`` raises ``error``."""
    try:
        fn(*args, **kwargs)
    except error:
        return
    except Exception as other:   # noqa: BLE001 - report whatever the student raised
        raise AssertionError(_("{what}: expected {error}, got {other}: {message}")
                             .format(what=what, error=error.__name__,
                                     other=type(other).__name__, message=other)) from None
    raise AssertionError(_("{what}: expected {error}, but nothing was raised")
                         .format(what=what, error=error.__name__))


def says_even(message: str) -> bool:
    """Whether a student's error message says "even": the English word, or the word in the
    notebook's language (a Chinese student writes 偶数)."""
    return "even" in message or _("even") in message


def _referenced_names(code: types.CodeType):
    """Global, closure and attribute names used by ``code`` and the functions nested in it."""
    yield from code.co_names
    yield from code.co_freevars
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _referenced_names(const)


def _forbidden(fn_name: str, name: str) -> AssertionError:
    return AssertionError(
        _("{function} uses `{name}`; write it with plain torch operations (@, .transpose, "
          "torch.exp / torch.softmax, .sum) instead of the course library or PyTorch's fused "
          "attention").format(function=fn_name, name=name))


def _check_sandboxed_plain_torch(fn, forbidden_modules, forbidden_names) -> None:
    """check_plain_torch for a function that lives in the grading sandbox: its code objects
    are compiled by the grader from the student's source, not taken from the student."""
    is_function, codes, modules, imported = type(fn).grading_code_view(fn)
    if not is_function:
        raise AssertionError(_("expected a function defined with `def`, got {value}")
                             .format(value=repr(fn)))
    if not codes:
        raise AssertionError(_("{function} must be defined with `def` in your answer cell")
                             .format(function=fn.__name__))
    for code in codes:
        for name in sorted(set(_referenced_names(code))):
            sources = (modules.get(name, ""), imported.get(name, ""))
            if name in forbidden_names or any(s.startswith(tuple(forbidden_modules))
                                              for s in sources):
                raise _forbidden(fn.__name__, name)


def check_plain_torch(fn, forbidden_modules=FORBIDDEN_MODULES,
                      forbidden_names=FORBIDDEN_NAMES) -> None:
    """Fail if the graded function ``fn`` calls the course library instead of torch ops."""
    if hasattr(type(fn), "grading_code_view"):       # utils.grading.remote.RemoteObject
        _check_sandboxed_plain_torch(fn, forbidden_modules, forbidden_names)
        return
    if not inspect.isfunction(fn):
        raise AssertionError(_("expected a function defined with `def`, got {value}")
                             .format(value=type(fn).__name__))
    namespace = dict(fn.__globals__)
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            namespace[name] = cell.cell_contents
        except ValueError:            # an empty closure cell
            pass
    for name in sorted(set(_referenced_names(fn.__code__))):
        target = namespace.get(name)
        module = getattr(target, "__module__", None) or getattr(target, "__name__", "")
        from_library = isinstance(module, str) and module.startswith(tuple(forbidden_modules))
        if name in forbidden_names or (target is not None and from_library):
            raise _forbidden(fn.__name__, name)


# --- Named mistakes -------------------------------------------------------------------------
# A test cell computes, next to the right answer, the outputs of the typical wrong answers
# (softmax over the wrong axis, no 1/sqrt(d), ...) on the same input, and asks ``diagnose``
# whether the student's output is one of them. If it is, the student reads what went wrong and
# how to fix it instead of the first failing number. Only outputs are compared, so this works
# the same when the student's function runs in the grading sandbox (a remote proxy whose
# results arrive as plain data).

def _as_float64(x):
    """``x`` as a float64 tensor, or None if it is not numeric data."""
    if isinstance(x, bool):
        return torch.tensor(float(x), dtype=torch.float64)
    if isinstance(x, torch.Tensor):
        return x.detach().to(torch.float64)
    if isinstance(x, (int, float)):
        return torch.tensor(float(x), dtype=torch.float64)
    if isinstance(x, (list, tuple)):
        try:
            return torch.as_tensor(x, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            return None
    return None


def matches(actual, candidate, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """True if ``actual`` equals ``candidate`` (same shape, elementwise within the tolerance;
    NaN matches NaN and infinities must agree). Never raises: anything else is no match."""
    if isinstance(actual, (tuple, list)) and isinstance(candidate, (tuple, list)) and (
            any(isinstance(a, (torch.Tensor, tuple, list)) for a in actual)
            or any(isinstance(c, (torch.Tensor, tuple, list)) for c in candidate)):
        return len(actual) == len(candidate) and all(
            matches(a, c, atol, rtol) for a, c in zip(actual, candidate))
    a, c = _as_float64(actual), _as_float64(candidate)
    if a is None or c is None or tuple(a.shape) != tuple(c.shape):
        return False
    return bool(torch.allclose(a, c, atol=atol, rtol=rtol, equal_nan=True))


def diagnose(actual, expected, candidates, what: str, atol: float = 1e-5,
             rtol: float = 1e-4) -> None:
    """Fail with a named mistake if ``actual`` is the output of a known wrong answer.

    ``candidates`` maps a message (what went wrong: the fix, one or two lines) to the output
    that mistake gives on the same input; a list of (message, output) pairs may repeat a
    message for two variants of one mistake. Nothing happens if ``actual`` is right (matches
    ``expected``) or matches no candidate: the ordinary checks that follow then report the
    first wrong number. A candidate equal to ``expected`` on this input is skipped, so a right
    answer is never blamed. ``expected=None`` skips that guard: use it only where every
    candidate differs from the right answer on this input (the tests grade a right answer).
    """
    if expected is not None and matches(actual, expected, atol, rtol):
        return
    pairs = candidates.items() if isinstance(candidates, dict) else candidates
    for message, wrong in pairs:
        if expected is not None and matches(wrong, expected, atol, rtol):
            continue
        if matches(actual, wrong, atol, rtol):
            raise AssertionError(_("{what}: {message}").format(what=what, message=message))


def call(fn, *args, hints=None, what: str = None, **kwargs):
    """``fn(*args, **kwargs)``; if it raises, fail with a message naming the likely mistake.

    ``hints`` maps a regular expression (searched in "ExceptionName: message") to what went
    wrong and how to fix it, e.g. ``{"batch2 tensor|cannot be multiplied": "scores need Q Kᵀ:
    transpose the keys' last two axes"}``; without a match, a generic explanation of common
    raw PyTorch errors is used (``explain_error``). The grader's own errors pass through.
    ``what`` defaults to "your function" (in the notebook's language).
    """
    import re

    from utils.grading.rubric import _is_graders_own
    try:
        return fn(*args, **kwargs)
    except Exception as error:      # noqa: BLE001 - the student's error, explained
        if _is_graders_own(error) or isinstance(error, AssertionError):
            raise
        what = _("your function") if what is None else what
        text = f"{type(error).__name__}: {error}"
        for pattern, message in (hints or {}).items():
            if re.search(pattern, text):
                raise AssertionError(_("{what}: {message} (it raised {error})").format(
                    what=what, message=message, error=text.splitlines()[0][:200])) from None
        raise AssertionError(_("{what}: {message}").format(what=what, message=explain_error(error))
                             ) from None


def output_or_none(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, or None if ``fn`` is None or raises: for a diagnosis that looks
    at another of the student's answers, which may be missing (pass
    ``globals().get("name")``) or unfinished, without failing because of it."""
    if fn is None:
        return None
    try:
        return fn(*args, **kwargs)
    except TimeoutError:
        raise
    except Exception as error:   # noqa: BLE001 - the other answer failed: no diagnosis
        # The grader's own errors (a sandbox that died, a broken call) are not the student's.
        if type(error).__module__.startswith("utils.grading"):
            raise
        return None
