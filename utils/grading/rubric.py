"""Partial credit for an autograded exercise: its points split over named checks.

A test cell builds a ``Rubric``, runs each requirement inside ``with rubric.check(name, points):``
and ends with ``rubric.result()`` as its last expression. A failed check costs only its own
points; the cell prints which checks passed and what each failed one found, and its value (the
points earned, a number) is what nbgrader records: ``determine_grade`` gives a test cell the
number it displays as partial credit. When every check fails the cell raises instead, so the
student sees an error (and the grade is 0 either way).

Checks are independent: each one calls the student's code again, so a crash in one (a hidden
edge case, a NotImplementedError) does not hide the others.

Labels, for the instructor's table (``python -m utils.grading table``):
- ``kind``, the item's format: ``variant`` (implement a case), ``find-and-fix`` (a planted bug),
  ``predict`` (a number or shape committed before running) or ``practice``;
- ``reading``, what the item asks of a student, read strictly: ``copy`` (re-type a lesson
  cell), ``adapt`` (a lesson cell with a small change, or a formula the exercise gives) or
  ``transfer`` (apply the idea to a case no lesson cell shows). Only ``transfer`` counts as
  transfer, whatever the format;
- ``bug``, for a find-and-fix item only: the class of the planted bug (kebab-case), so the table
  can refuse a class that two lessons share.

A predict item's truth lives in the hidden tests: run by the student (no hidden tests, not in
grading mode), its visible checks only see that each prediction is committed and well-formed, and
``result`` says so instead of claiming points.
"""

import contextlib
import re

from utils.grading import in_grading_mode
from utils.i18n import _

KINDS = ("variant", "find-and-fix", "predict", "practice")
READINGS = ("copy", "adapt", "transfer")
MANUAL_KINDS = ("written", "figure")
_BUG_CLASS = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")

# Raw PyTorch messages of typical shape mistakes -> what the student most likely did (a function,
# so that each meaning is translated into the language the notebook speaks when it is read).
def _raw_errors():
    return (
        (r"Expected size for first two dimensions of batch2 tensor|"
         r"mat1 and mat2 shapes cannot be multiplied|size mismatch, got input",
         _("the inner sizes of a matrix product do not agree: scores need Q Kᵀ, so transpose the "
           "keys' last two axes (keys.transpose(-2, -1)) and check every shape against its "
           "comment")),
        (r"must match the size of tensor b|The size of tensor a",
         _("two tensors with different shapes were combined elementwise: print the shapes, and "
           "add a length-1 axis (x[:, None] or .unsqueeze) where one should broadcast")),
        (r"Dimension out of range|IndexError: index .* out of (range|bounds)",
         _("an axis or an index that does not exist: count the axes of the tensor (negative "
           "axes count from the end)")),
        (r"view size is not compatible|shape '.*' is invalid for input of size",
         _("a view/reshape that does not fit: use .reshape (or .contiguous().view) after a "
           "transpose, and check that the sizes multiply to the same total")),
    )


def explain_error(error: BaseException) -> str:
    """One line for an exception raised by the student's code, naming the likely mistake."""
    text = f"{type(error).__name__}: {error}".strip()
    first = text.splitlines()[0][:300] if text else type(error).__name__
    if isinstance(error, NotImplementedError):
        return _("not answered yet (your function still raises NotImplementedError)")
    for pattern, meaning in _raw_errors():
        if re.search(pattern, text):
            return _("your code raised {error} — {meaning}").format(error=first, meaning=meaning)
    return _("your code raised {error}").format(error=first)


def _is_graders_own(error: BaseException) -> bool:
    """Errors of the grading machinery (a stopped sandbox, a timeout) are not a failed check:
    they must stop the cell as they would without a rubric."""
    return isinstance(error, TimeoutError) or type(error).__module__.startswith("utils.grading")


class Rubric:
    """Named checks sharing ``points``; see the module docstring."""

    def __init__(self, exercise: str, points: float, kind: str, reading: str = None,
                 bug: str = None):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if reading is not None and reading not in READINGS:
            raise ValueError(f"reading must be one of {READINGS}, got {reading!r}")
        if bug is not None and kind != "find-and-fix":
            raise ValueError("only a find-and-fix item names a bug class (bug=...)")
        if bug is not None and not _BUG_CLASS.fullmatch(bug):
            raise ValueError(f"bug must be a kebab-case class such as 'mask-after-softmax', "
                             f"got {bug!r}")
        self.exercise, self.points, self.kind = exercise, float(points), kind
        self.reading, self.bug = reading, bug
        self.results = []                 # (name, points, message or None)

    @contextlib.contextmanager
    def check(self, name: str, points: float):
        """Run one requirement; an AssertionError or an error of the student's code fails it."""
        if any(name == done for done, _points, _message in self.results):
            raise ValueError(f"two checks are named {name!r}")
        try:
            yield
        except Exception as error:        # noqa: BLE001 - the student's failure, reported
            if _is_graders_own(error):
                raise
            message = (str(error).splitlines()[0] if isinstance(error, AssertionError)
                       and str(error) else explain_error(error))
            self.results.append((name, float(points), message))
        else:
            self.results.append((name, float(points), None))

    def earned(self) -> float:
        return sum(points for _name, points, message in self.results if message is None)

    def report(self) -> str:
        passed = sum(message is None for _name, _points, message in self.results)
        lines = [_("{exercise}: {passed} of {total} checks passed ({earned} of {points} points)")
                 .format(exercise=self.exercise, passed=passed, total=len(self.results),
                         earned=_number(self.earned()), points=_number(self.points))]
        for name, points, message in self.results:
            line = (_("passed ({points} pt) {name}") if message is None else
                    _("FAILED ({points} pt) {name}")).format(points=_number(points), name=name)
            lines.append(f"  {line}" + ("" if message is None else f"\n      -> {message}"))
        return "\n".join(lines)

    def committed_report(self) -> str:
        """What a student's own run of a predict item shows: nothing about right or wrong."""
        names = "".join("\n  " + _("committed: {name}").format(name=name)
                        for name, _points, _message in self.results)
        return (_("{exercise}: your {count} predictions are committed and well-formed.")
                .format(exercise=self.exercise, count=len(self.results)) + names + "\n"
                + _("They are graded after you submit: the feedback then says how far off each "
                    "one is and shows how to see the true value."))

    def result(self) -> float:
        """Print the report and return the points earned (the cell's partial credit)."""
        total = sum(points for _name, points, _message in self.results)
        if abs(total - self.points) > 1e-9:
            raise RuntimeError(f"grader bug: the checks of {self.exercise} add up to {total} "
                               f"points, the exercise has {self.points}")
        if self.kind == "predict" and not in_grading_mode() and self.earned() == self.points:
            print(self.committed_report())
            return round(self.earned(), 6)
        print(self.report())
        if self.earned() == 0:
            failed = _("; ").join(_("{what}: {message}").format(what=name, message=message)
                                  for name, _points, message in self.results)
            raise AssertionError(_("{exercise}: no check passed — {failed}")
                                 .format(exercise=self.exercise, failed=failed))
        return round(self.earned(), 6)


def _number(x: float) -> str:
    return f"{x:g}"
