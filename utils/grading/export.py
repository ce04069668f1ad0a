"""Grade tables read from the gradebook, in three layouts.

``grade_table`` (format "nbgrader"): one row per student, one column per graded cell
(autograded and manual), total. nbgrader's stock CSV export has only one total per assignment;
``PerCellCsvExportPlugin`` makes ``nbgrader export`` write this table.

``canvas_table`` and ``moodle_table``: one grade column per assignment (= chapter), ready to
import into a Canvas gradebook or a Moodle course (grade import, CSV file). Every student of the
gradebook has a row; one without a submission gets 0, marked missing.
"""

import csv
import dataclasses
import io
import pathlib

import nbformat
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin


def _number(value: float) -> str:
    """2.0 -> "2", 1.5 -> "1.5" (no float noise in the CSV)."""
    return f"{float(value):g}"


def _cell_order(assignment, course_dir) -> list:
    """(notebook name, graded cell name) in the order of the source notebook.

    The gradebook does not keep cell order, so it is read from
    ``<course_dir>/source/<assignment>/<notebook>.ipynb``; cells it does not list go last,
    by name.
    """
    order = []
    for notebook in sorted(assignment.notebooks, key=lambda nb: nb.name):
        names = [cell.name for cell in notebook.grade_cells + notebook.task_cells]
        position = {}
        folder = pathlib.Path(course_dir or ".") / "source" / assignment.name
        path = folder / f"{notebook.name}.ipynb"
        if path.is_file():
            cells = nbformat.read(path, as_version=4).cells
            ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in cells]
            position = {name: i for i, name in enumerate(ids) if name}
        names.sort(key=lambda name: (position.get(name, len(position)), name))
        order.extend((notebook.name, name) for name in names)
    return order


def _chosen_assignments(gradebook: Gradebook, assignments=None) -> list:
    """The gradebook's assignments named in ``assignments`` (all when empty)."""
    chosen = [a for a in gradebook.assignments if not assignments or a.name in assignments]
    missing = set(assignments or []) - {a.name for a in chosen}
    if missing:
        raise ValueError(f"assignment(s) {sorted(missing)} are not in the gradebook; "
                         f"release them first (python -m utils.grading release)")
    return chosen


def _submission_grades(gradebook: Gradebook, assignment: str, student: str) -> tuple:
    """({(notebook, graded cell): score}, cells waiting for a human), or (None, 0) if the
    student has no graded submission of ``assignment``. A score is the manual one if set."""
    try:
        submission = gradebook.find_submission(assignment, student)
    except MissingEntry:
        return None, 0
    scores, waiting = {}, 0
    for notebook in submission.notebooks:
        for grade in notebook.grades:
            scores[(notebook.name, grade.name)] = grade.score
            waiting += bool(grade.needs_manual_grade)
    return scores, waiting


def grade_table(gradebook: Gradebook, assignments=None, students=None, course_dir=None):
    """Header and rows of the grade table.

    ``course_dir`` (where ``source/`` is) gives the column order.
    Columns: ``student_id``, one per graded cell (``<grade_id>``; prefixed ``<assignment>:``
    when several assignments are exported), ``total``, ``max_total``, ``needs_manual_grade``
    (graded cells still waiting for a human). A student without a submission gets empty cells.
    """
    chosen = _chosen_assignments(gradebook, assignments)
    several = len(chosen) > 1
    columns = []                                  # (assignment, notebook, cell, column name)
    for assignment in chosen:
        for notebook, cell in _cell_order(assignment, course_dir):
            name = f"{assignment.name}:{cell}" if several else cell
            if any(c[3] == name for c in columns):
                name = f"{assignment.name}:{notebook}:{cell}"
            columns.append((assignment.name, notebook, cell, name))
    max_total = sum(a.max_score for a in chosen)
    header = ["student_id", *(c[3] for c in columns), "total", "max_total", "needs_manual_grade"]
    rows = []
    for student in sorted(gradebook.students, key=lambda s: s.id):
        if students and student.id not in students:
            continue
        scores, waiting = {}, 0
        for assignment in chosen:
            grades, pending = _submission_grades(gradebook, assignment.name, student.id)
            for (notebook, cell), score in (grades or {}).items():
                scores[(assignment.name, notebook, cell)] = score
            waiting += pending
        cells = [scores.get(c[:3]) for c in columns]
        rows.append([student.id, *("" if s is None else _number(s) for s in cells),
                     _number(sum(s for s in cells if s is not None)), _number(max_total),
                     str(waiting)])
    return header, rows


# --- learning management systems: one column per assignment --------------------------------
FORMATS = ("nbgrader", "canvas", "moodle")
CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
CANVAS_ID_COLUMNS = {"SIS User ID": ("sisuserid",), "SIS Login ID": ("sisloginid", "login"),
                     "ID": ("id", "canvasid")}
CANVAS_POINTS_ROW = "Points Possible"
CANVAS_MISSING_COLUMN = "Missing (ignore on import)"
MOODLE_ID_COLUMNS = {"ID number": ("idnumber",), "Username": ("username",),
                     "Email address": ("email", "emailaddress")}
MISSING_FEEDBACK = "missing: no submission"


def choose(value: str, choices: dict, option: str) -> str:
    """``value`` as one of ``choices`` (a key, or an alias; case, spaces, '_' and '-' ignored)."""
    key = "".join(ch for ch in str(value).lower() if ch.isalnum())
    for choice, aliases in choices.items():
        if key == "".join(ch for ch in choice.lower() if ch.isalnum()) or key in aliases:
            return choice
    raise ValueError(f"{option} {value!r} is not one of "
                     f"{', '.join(repr(c) for c in choices)}; pass one of them")


@dataclasses.dataclass
class AssignmentTotals:
    """Per student and assignment: the total score (manual grades included), None if the
    student has no graded submission."""
    assignments: list            # [(assignment name, max score)]
    students: list               # [(student id, {assignment name: total or None})]
    waiting: int = 0             # graded cells still waiting for manual grading (count as 0)

    def missing(self) -> list:
        """(student, assignment) pairs without a graded submission."""
        return [(student, name) for student, totals in self.students
                for name, total in totals.items() if total is None]


def assignment_totals(gradebook: Gradebook, assignments=None, students=None) -> AssignmentTotals:
    """Every student of the gradebook (or of ``students``) with one total per assignment."""
    chosen = _chosen_assignments(gradebook, assignments)
    result = AssignmentTotals([(a.name, a.max_score) for a in chosen], [])
    for student in sorted(gradebook.students, key=lambda s: s.id):
        if students and student.id not in students:
            continue
        totals = {}
        for assignment in chosen:
            grades, waiting = _submission_grades(gradebook, assignment.name, student.id)
            totals[assignment.name] = None if grades is None else sum(grades.values())
            result.waiting += waiting
        result.students.append((student.id, totals))
    return result


def canvas_table(totals: AssignmentTotals, id_column: str = "SIS User ID") -> tuple:
    """Header and rows of a Canvas gradebook import CSV.

    Columns: Student, ID, SIS User ID, SIS Login ID, Section (the student id fills
    ``id_column``, the others stay empty), one column per assignment named after it (points),
    then ``CANVAS_MISSING_COLUMN``: the assignments the student has no submission for, which
    score 0. The first row under the header is Canvas's "Points Possible" row.
    """
    id_column = choose(id_column, CANVAS_ID_COLUMNS, "--canvas-id-column")
    slot = CANVAS_IDENTITY.index(id_column)
    names = [name for name, _ in totals.assignments]
    header = [*CANVAS_IDENTITY, *names, CANVAS_MISSING_COLUMN]
    rows = [[CANVAS_POINTS_ROW, *[""] * (len(CANVAS_IDENTITY) - 1),
             *(_number(points) for _, points in totals.assignments), "(read only)"]]
    for student, scores in totals.students:
        if id_column == "ID" and not student.isdigit():
            raise ValueError(f"student id {student!r} is not a Canvas user ID (a number); "
                             f"use --canvas-id-column 'SIS User ID' or 'SIS Login ID'")
        identity = [""] * len(CANVAS_IDENTITY)
        identity[slot] = student
        missing = [name for name in names if scores[name] is None]
        rows.append([*identity, *(_number(scores[name] or 0) for name in names),
                     "; ".join(missing)])
    return header, rows


def moodle_table(totals: AssignmentTotals, id_column: str = "ID number") -> tuple:
    """Header and rows of a Moodle grade import CSV.

    Columns: ``id_column`` (the student id; map it to the user field of the same name), then
    per assignment ``<assignment>`` (the grade) and ``<assignment> (feedback)``, which says
    ``MISSING_FEEDBACK`` when the student has no submission (grade 0).
    """
    id_column = choose(id_column, MOODLE_ID_COLUMNS, "--moodle-id-column")
    names = [name for name, _ in totals.assignments]
    header = [id_column, *(column for name in names for column in (name, f"{name} (feedback)"))]
    rows = []
    for student, scores in totals.students:
        if id_column == "Email address" and "@" not in student:
            raise ValueError(f"student id {student!r} is not an email address; use "
                             f"--moodle-id-column 'ID number' or 'Username'")
        cells = []
        for name in names:
            missing = scores[name] is None
            cells += [_number(scores[name] or 0), MISSING_FEEDBACK if missing else ""]
        rows.append([student, *cells])
    return header, rows


def write_csv(path, header, rows) -> pathlib.Path:
    """Write the table whole or not at all (a full disk leaves the old file)."""
    from utils.grading.diskfull import atomic_write
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(header)
    writer.writerows(rows)
    return atomic_write(path, text.getvalue().encode("utf-8"))


class PerCellCsvExportPlugin(ExportPlugin):
    """``nbgrader export`` plugin writing ``grade_table`` (``--to`` sets the file)."""

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "grades.csv"
        course_dir = self.config.get("CourseDirectory", {}).get("root", ".")
        header, rows = grade_table(gradebook, [str(a) for a in self.assignment] or None,
                                   [str(s) for s in self.student] or None, course_dir)
        self.log.info("Exporting per-cell grades to %s", dest)
        write_csv(dest, header, rows)
