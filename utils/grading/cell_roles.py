"""What a cell of a released notebook is, by its nbgrader metadata (read by the grader and by
``utils.grading.student_text``, which must not import the grader)."""


def nbgrader_metadata(cell) -> dict:
    """The cell's nbgrader metadata ({} if none)."""
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def cell_role(cell) -> str:
    """'setup' (locked code), 'test' (graded, not an answer), 'student' or 'text'."""
    if cell.cell_type != "code":
        return "text"
    meta = nbgrader_metadata(cell)
    if meta.get("grade") and not meta.get("solution"):
        return "test"
    if meta.get("locked") and not meta.get("solution") and meta.get("grade_id"):
        return "setup"
    return "student"
