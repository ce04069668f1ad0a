"""Grade table: one row per student, one column per graded cell (autograded and manual), total.

nbgrader's stock CSV export has only one total per assignment. ``grade_table`` reads the
gradebook directly; ``PerCellCsvExportPlugin`` makes ``nbgrader export`` write the same table.
"""

import csv
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


def grade_table(gradebook: Gradebook, assignments=None, students=None, course_dir=None):
    """Header and rows of the grade table.

    ``course_dir`` (where ``source/`` is) gives the column order.
    Columns: ``student_id``, one per graded cell (``<grade_id>``; prefixed ``<assignment>:``
    when several assignments are exported), ``total``, ``max_total``, ``needs_manual_grade``
    (graded cells still waiting for a human). A student without a submission gets empty cells.
    """
    chosen = [a for a in gradebook.assignments if not assignments or a.name in assignments]
    missing = set(assignments or []) - {a.name for a in chosen}
    if missing:
        raise ValueError(f"assignment(s) {sorted(missing)} are not in the gradebook; "
                         f"release them first (python -m utils.grading release)")
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
            try:
                submission = gradebook.find_submission(assignment.name, student.id)
            except MissingEntry:
                continue
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    scores[(assignment.name, notebook.name, grade.name)] = grade.score
                    waiting += bool(grade.needs_manual_grade)
        cells = [scores.get(c[:3]) for c in columns]
        rows.append([student.id, *("" if s is None else _number(s) for s in cells),
                     _number(sum(s for s in cells if s is not None)), _number(max_total),
                     str(waiting)])
    return header, rows


def write_csv(path, header, rows) -> pathlib.Path:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(header)
        writer.writerows(rows)
    return path


class PerCellCsvExportPlugin(ExportPlugin):
    """``nbgrader export`` plugin writing ``grade_table`` (``--to`` sets the file)."""

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "grades.csv"
        course_dir = self.config.get("CourseDirectory", {}).get("root", ".")
        header, rows = grade_table(gradebook, [str(a) for a in self.assignment] or None,
                                   [str(s) for s in self.student] or None, course_dir)
        self.log.info("Exporting per-cell grades to %s", dest)
        write_csv(dest, header, rows)
